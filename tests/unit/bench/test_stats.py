"""Pure helpers of the benchmarks: percentiles, summaries, target checks, table rows, dump parsing."""

from __future__ import annotations

import random

import pytest

from bench.harness.ovs import FlowLine, compare_dumps, parse_dump_flows
from bench.harness.report import Result, Target, format_number, table_rows
from bench.harness.stats import percentile, ratio, summarize_ms, within
from bench.harness.workload import flows


def test_percentile_matches_linear_interpolation() -> None:
    data = [1.0, 2.0, 3.0, 4.0]
    assert percentile(data, 0) == 1.0
    assert percentile(data, 100) == 4.0
    assert percentile(data, 50) == pytest.approx(2.5)
    assert percentile(data, 25) == pytest.approx(1.75)


def test_percentile_ignores_order_and_is_monotonic() -> None:
    rng = random.Random(7)
    data = [rng.expovariate(1.0) for _ in range(501)]
    shuffled = data[:]
    rng.shuffle(shuffled)
    qs = [0, 1, 10, 50, 90, 95, 99, 100]
    values = [percentile(shuffled, q) for q in qs]
    assert values == sorted(values)
    assert values[0] == min(data) and values[-1] == max(data)
    assert percentile(data, 50) == sorted(data)[250]  # odd count: the middle sample


@pytest.mark.parametrize("bad", [-1, 100.5])
def test_percentile_rejects_bad_input(bad: float) -> None:
    with pytest.raises(ValueError):
        percentile([1.0], bad)
    with pytest.raises(ValueError):
        percentile([], 50)


def test_summary_is_in_milliseconds() -> None:
    s = summarize_ms([0.001, 0.002, 0.003])
    assert s.n == 3
    assert s.p50_ms == pytest.approx(2.0)
    assert s.mean_ms == pytest.approx(2.0)
    assert s.max_ms == pytest.approx(3.0)


def test_ratio_and_within() -> None:
    assert ratio(6.0, 3.0) == 2.0
    assert ratio(1.0, 0.0) is None
    assert within(11.9, 10.0, 0.2)
    assert not within(12.1, 10.0, 0.2)


def test_targets_and_table_rows() -> None:
    res = Result("activation")
    res.add("p50", 12.0, "ms", Target("<=", 10))
    res.add("rate", 350.0, "/s", Target(">=", 300))
    res.add("info", None, "ms")
    rows = table_rows([res, Result("scale", error="TimeoutError: no switch\nmore")])
    assert rows[0] == ("activation", "p50", "12.0 ms", "<= 10.0 ms", "MISSED")
    assert rows[1] == ("activation", "rate", "350 /s", ">= 300 /s", "ok")
    assert rows[2] == ("activation", "info", "-", "", "")
    assert rows[3] == ("scale", "error", "TimeoutError: no switch", "", "FAILED")


@pytest.mark.parametrize(
    "value,text",
    [(0.01234, "0.0123"), (1.234, "1.23"), (12.34, "12.3"), (123.4, "123"), (12345.6, "12,346"), (0, "0"), (None, "-")],
)
def test_format_number(value: float | None, text: str) -> None:
    assert format_number(value) == text


DUMP = """\
 cookie=0x5650000000000007, duration=12.345s, table=0, n_packets=3, n_bytes=180, hard_timeout=3600, priority=1000,tcp,in_port=1,nw_dst=203.0.113.20,tp_dst=9000 actions=output:3
 cookie=0xd650000000000000, duration=20.5s, table=0, n_packets=0, n_bytes=0, priority=0 actions=NORMAL
"""


def test_parse_dump_flows() -> None:
    flows_ = parse_dump_flows("OFPST_FLOW reply (OF1.3) (xid=0x2):\n" + DUMP)
    assert [f.cookie for f in flows_] == [0x5650000000000007, 0xD650000000000000]
    assert flows_[0].duration_s == pytest.approx(12.345)
    assert flows_[0].priority == 1000 and flows_[0].n_packets == 3
    assert flows_[0].match == "tcp,in_port=1,nw_dst=203.0.113.20,tp_dst=9000"
    assert flows_[1].priority == 0 and flows_[1].match == ""


def test_compare_dumps_sees_resets_additions_and_removals() -> None:
    a = FlowLine(1, 10.0, 1000, 0, "tcp,tp_dst=1")
    b = FlowLine(2, 10.0, 1000, 0, "tcp,tp_dst=2")
    same = compare_dumps(
        [a, b], [FlowLine(1, 11.0, 1000, 0, "tcp,tp_dst=1"), FlowLine(2, 11.0, 1000, 0, "tcp,tp_dst=2")]
    )
    assert same.ok
    reset = compare_dumps([a, b], [FlowLine(1, 0.5, 1000, 0, "tcp,tp_dst=1"), b])
    assert reset.reset == 1 and not reset.ok
    changed = compare_dumps([a, b], [a, FlowLine(3, 1.0, 1000, 0, "tcp,tp_dst=3")])
    assert (changed.missing, changed.added) == (1, 1) and not changed.ok


def test_workload_flows_are_distinct_and_bounded() -> None:
    got = list(flows(2500))
    assert len({(f.dst_ip, f.dst_port) for f in got}) == 2500
    assert all(9000 <= f.dst_port <= 9999 for f in got)
    assert got[1000].dst_ip != got[0].dst_ip
    with pytest.raises(ValueError):
        list(flows(10**6))


def test_reconcile_lines_pair_connect_and_reconcile_per_switch() -> None:
    from bench.suite.scale import reconcile_lines

    log = (
        "2026-11-22 00:12:35,100 viplanes.controller INFO switch connected dpid=3\n"
        "2026-11-22 00:12:35,200 viplanes.controller INFO switch connected dpid=1\n"
        "2026-11-22 00:12:35,350 viplanes.controller.runtime.lane_runtime INFO reconciled switch s1 (dpid 1): "
        "kept 1, added 0, deleted 0, refreshed 0 in 12.5 ms (after 3.0 ms waiting for other changes)\n"
        "2026-11-22 00:12:36,600 viplanes.controller.runtime.lane_runtime INFO reconciled switch s3 (dpid 3): "
        "kept 20003, added 0, deleted 0, refreshed 0\n"
        "2026-11-22 00:12:37,000 viplanes.controller.runtime.lane_runtime INFO reconciled switch s4 (dpid 4): kept 1\n"
    )
    got = {x["dpid"]: x for x in reconcile_lines(log)}
    assert set(got) == {1, 3}  # dpid 4 never connected in this log: no time for it
    assert got[1]["ms"] == pytest.approx(150.0, abs=1)
    assert got[3]["ms"] == pytest.approx(1500.0, abs=1)
    assert (got[1]["work_ms"], got[1]["waited_ms"]) == (12.5, 3.0)
    assert got[3]["work_ms"] is None and got[3]["plan"].startswith("kept 20003")


def test_per_second_buckets() -> None:
    from bench.suite.churn import per_second

    assert per_second([]) == []
    assert per_second([0.1, 0.9, 1.0, 2.5, 2.7, 2.99]) == [2, 1, 3]


def test_py_spy_summary_skips_idle_frames() -> None:
    from bench.harness.spy import summarize

    raw = (
        "thread (0x1);run (threading.py:1);request (viplanes/lanes/manager.py:96);do_execute "
        "(/x/site-packages/sqlalchemy/engine/default.py:924) 30\n"
        "thread (0x2);run (threading.py:1);wait (threading.py:320) 500\n"
        "thread (0x1);run (threading.py:1);request (viplanes/lanes/manager.py:96) 10\n"
    )
    s = summarize(raw)
    assert s["samples"] == 540 and s["busy_samples"] == 40
    assert s["self"][0] == ("do_execute (sqlalchemy/engine/default.py)", 30)
    assert ("request (viplanes/lanes/manager.py)", 40) in s["inclusive"]


def test_markdown_rows_from_saved_json() -> None:
    from bench.harness.report import markdown_rows

    res = Result("churn")
    res.add("activations/s", 103.4, "/s", Target(">=", 300))
    res.add("p50", 21.4, "ms", note="8 clients")
    saved = res.to_json(["x"])
    lines = markdown_rows([saved, {"name": "scale", "error": "TimeoutError: x\ny", "metrics": []}])
    assert lines[2] == "| churn | activations/s | 103 /s | >= 300 /s ✘ |"
    assert lines[3] == "| churn | p50 (8 clients) | 21.4 ms |  |"
    assert lines[4] == "| scale | error | TimeoutError: x | |"


def test_ports_by_switch_covers_every_port_the_campus_uses() -> None:
    from bench.harness.ovs import ports_by_switch
    from bench.harness.workload import flows, lane_spec
    from viplanes.api.app import default_topology
    from viplanes.controller.compile.lane import compile_base, compile_lane

    topo = default_topology()
    ports = ports_by_switch(topo)
    assert set(ports) == {sw.name for sw in topo.switches}
    name = {sw.dpid: sw.name for sw in topo.switches}
    # every port a compiled flow matches on or outputs to exists on the benchmark bridge
    per_dpid = compile_base(topo)
    for host in ("desktop", "server", "dtn"):
        for dpid, msgs in compile_lane(lane_spec(topo, 1, host, next(flows(1))), topo, 0.0).items():
            per_dpid.setdefault(dpid, []).extend(msgs)
    for dpid, msgs in per_dpid.items():
        for msg in msgs:
            if not hasattr(msg, "match"):
                continue  # meter mods
            in_port = msg.match.get("in_port")
            outs = [
                a.port
                for i in msg.instructions
                for a in getattr(i, "actions", [])
                if hasattr(a, "port") and a.port < 0xFFFFFF00
            ]
            for port in ([in_port] if in_port else []) + outs:
                assert port in ports[name[dpid]], (name[dpid], port)
