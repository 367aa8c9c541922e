"""Pure parts of the peers benchmark: flow-monitor lines, completion times, the peers' rule sets."""

from __future__ import annotations

import time

import yaml

from bench.harness.flowwatch import FlowEvent, completion_time, cookie_marker, parse_monitor_line, port_marker
from bench.harness.peer_rules import IDLE_ACL, faucet_acls, faucet_config, ofctl_rest_bodies, ofctl_rest_delete_bodies
from bench.harness.table_format import markdown_rows
from bench.harness.workload import flows, lane_spec

ADDED = (
    " event=ADDED table=1 hard_timeout=3600 cookie=0x5650000000000005 "
    "tcp,in_port=1,nw_dst=203.0.113.20,tp_dst=9000 actions=output:2"
)
DELETED = (
    " event=DELETED reason=delete table=0 cookie=0x5adc15c0 "
    "tcp,in_port=3,nw_src=203.0.113.20,tp_src=9001 actions=goto_table:1"
)


def test_monitor_lines_parse_kind_table_and_cookie() -> None:
    ev = parse_monitor_line(ADDED)
    assert ev == FlowEvent("ADDED", 1, 0x5650000000000005, ADDED.strip())
    ev = parse_monitor_line(DELETED)
    assert ev is not None and (ev.kind, ev.table, ev.cookie) == ("DELETED", 0, 0x5ADC15C0)


def test_monitor_headers_and_noise_are_not_events() -> None:
    assert parse_monitor_line("ONFST_FLOW_MONITOR reply (OF1.3) (xid=0x0):") is None
    assert parse_monitor_line("") is None
    assert parse_monitor_line("ovs-ofctl: br0: failed to connect to socket") is None


def test_cookie_marker_is_exact() -> None:
    assert cookie_marker(0x5650000000000005).search(ADDED)
    assert not cookie_marker(0x565000000000000).search(ADDED)  # a prefix of the cookie
    assert not cookie_marker(0x56500000000000051).search(ADDED)


def test_port_marker_matches_both_directions_and_not_longer_ports() -> None:
    assert port_marker(9000).search(ADDED)
    assert port_marker(9001).search(DELETED)
    assert not port_marker(900).search(ADDED)
    assert not port_marker(90001).search(ADDED + "0")


def test_completion_time_counts_matching_events_after_since() -> None:
    add = parse_monitor_line(ADDED)
    other = parse_monitor_line(DELETED)
    assert add is not None and other is not None
    events = [(1.0, add), (2.0, other), (3.0, add), (4.0, add)]
    marker = cookie_marker(0x5650000000000005)
    assert completion_time(events, "ADDED", marker, 2, since=0.0) == 3.0
    assert completion_time(events, "ADDED", marker, 2, since=1.5) == 4.0  # the first is too early
    assert completion_time(events, "ADDED", marker, 3, since=1.5) is None
    assert completion_time(events, "DELETED", marker, 1, since=0.0) is None  # other cookie


def _lane() -> dict:
    from viplanes.api.app import default_topology
    from viplanes.controller.compile.lane import compile_lane

    topo = default_topology()
    return compile_lane(lane_spec(topo, 5, "desktop", next(flows(1))), topo, time.time())


def test_ofctl_rest_bodies_keep_the_flow_count_per_switch_and_stay_distinct() -> None:
    lane = _lane()
    bodies = ofctl_rest_bodies(lane, cookie=0x77)
    flowmods = {d: [m for m in ms if type(m).__name__ == "OFPFlowMod"] for d, ms in lane.items()}
    assert {d: len(b) for d, b in bodies.items()} == {d: len(m) for d, m in flowmods.items()}
    for dpid, bs in bodies.items():
        keys = {(b["table_id"], b["priority"], repr(sorted(b["match"].items()))) for b in bs}
        assert len(keys) == len(bs), f"two bodies on {dpid} would overwrite each other"
        for b in bs:
            assert b["dpid"] == dpid and b["cookie"] == 0x77
            assert not any(k.startswith("ct_") for k in b["match"])
            assert any(a["type"] == "OUTPUT" for a in b["actions"])
    deletes = ofctl_rest_delete_bodies(sorted(bodies), 0x77)
    assert [d["dpid"] for d in deletes] == sorted(bodies)
    assert all(d["table_id"] == 255 and d["cookie_mask"] == 2**64 - 1 for d in deletes)


def test_faucet_config_puts_each_rule_on_its_ingress_port_with_the_lane_port() -> None:
    lane = _lane()
    acls = faucet_acls(lane, "lane7", lane_port=9000)
    per_dp: dict[int, int] = {}
    for (dpid, _), (_, rules) in acls.items():
        per_dp[dpid] = per_dp.get(dpid, 0) + len(rules)
        for r in rules:
            assert 9000 in (r["rule"].get("tcp_src"), r["rule"].get("tcp_dst"))
    assert per_dp == {d: len([m for m in ms if type(m).__name__ == "OFPFlowMod"]) for d, ms in lane.items()}
    config = yaml.safe_load(faucet_config({1: {1, 2, 3}, 2: {1, 2, 3}, 3: {1, 2, 3, 4}, 4: {1, 2}}, acls))
    for (dpid, port), (name, rules) in acls.items():
        assert config["dps"][f"sw{dpid}"]["interfaces"][port]["acls_in"] == [name, IDLE_ACL]
        assert config["acls"][name] == rules
    idle_only = yaml.safe_load(faucet_config({1: {1, 2}}, {}))
    assert idle_only["dps"]["sw1"]["interfaces"][2]["acls_in"] == [IDLE_ACL]


def test_markdown_rows_give_ratios_to_ours_and_to_the_floor() -> None:
    s = {"p50_ms": 10.0, "p95_ms": 12.0, "p99_ms": 14.0}
    peer = {"p50_ms": 20.0, "p95_ms": 30.0, "p99_ms": 40.0}
    rows = markdown_rows(
        {
            "viplanes API (sqlite)": {"activation": s, "answer": s, "release": s},
            "Faucet": {"activation": peer, "release": None},
        },
        floor={"p50_ms": 5.0, "p95_ms": 6.0, "p99_ms": 7.0},
        floor_release={"p50_ms": 2.0, "p95_ms": 3.0, "p99_ms": 4.0},
    )
    faucet = [r for r in rows if r.startswith("| Faucet | activation")]
    assert faucet == ["| Faucet | activation: request -> visible | 20.0 | 30.0 | 40.0 | 2.00 | 4.00 |"]
    assert not any(r.startswith("| Faucet | release") for r in rows)


def test_markdown_rows_print_the_other_floors_against_the_ratios_floor() -> None:
    s = {"p50_ms": 10.0, "p95_ms": 12.0, "p99_ms": 14.0}
    rows = markdown_rows(
        {"viplanes API (sqlite)": {"activation": s, "release": s}},
        floor={"p50_ms": 5.0, "p95_ms": 6.0, "p99_ms": 7.0},
        floor_release={"p50_ms": 2.0, "p95_ms": 3.0, "p99_ms": 4.0},
        floor_label="floor (ssl, watched)",
        floor_clock=("send -> visible", "send -> gone"),
        other_floors=(
            ("old floor (tcp)", "activation: send -> barriers", {"p50_ms": 2.5, "p95_ms": 3.0, "p99_ms": 3.5}),
            ("old floor (tcp)", "release: send -> barriers", {"p50_ms": 1.0, "p95_ms": 1.5, "p99_ms": 2.0}),
        ),
    )
    assert "| floor (ssl, watched) | activation: send -> visible | 5.00 | 6.00 | 7.00 | - | 1 |" in rows
    assert "| floor (ssl, watched) | release: send -> gone | 2.00 | 3.00 | 4.00 | - | 1 |" in rows
    assert rows[-2:] == [
        "| old floor (tcp) | activation: send -> barriers | 2.50 | 3.00 | 3.50 | - | 0.5 |",
        "| old floor (tcp) | release: send -> barriers | 1.00 | 1.50 | 2.00 | - | 0.5 |",
    ]
