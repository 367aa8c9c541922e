"""The simulator itself: if it lied, every compiler test would be worthless."""

from __future__ import annotations

import pytest
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.flowsim import FlowSimError, FlowTable, ip_packet

PKT = ip_packet("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2", "tcp", 1000, 80)


def flow(
    priority: int = 10,
    cookie: int = 0,
    actions: list | None = None,
    command: int = ofp.OFPFC_ADD,
    meter: int | None = None,
    **match: object,
) -> parser.OFPFlowMod:
    inst = [parser.OFPInstructionMeter(meter)] if meter else []
    if actions is None:
        actions = [parser.OFPActionOutput(2)]
    inst.append(parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions))
    return parser.OFPFlowMod(
        None, cookie=cookie, priority=priority, command=command, match=parser.OFPMatch(**match), instructions=inst
    )


def delete(
    cookie: int = 0,
    cookie_mask: int = 0,
    strict: bool = False,
    priority: int = 10,
    out_port: int = ofp.OFPP_ANY,
    **match: object,
) -> parser.OFPFlowMod:
    return parser.OFPFlowMod(
        None,
        cookie=cookie,
        cookie_mask=cookie_mask,
        priority=priority,
        command=ofp.OFPFC_DELETE_STRICT if strict else ofp.OFPFC_DELETE,
        table_id=ofp.OFPTT_ALL,
        out_port=out_port,
        out_group=ofp.OFPG_ANY,
        match=parser.OFPMatch(**match),
    )


def test_highest_priority_wins_and_miss_drops() -> None:
    t = FlowTable()
    assert t.process(PKT, 1) == []
    t.apply(flow(priority=1, actions=[parser.OFPActionOutput(ofp.OFPP_NORMAL)]))
    t.apply(
        flow(
            priority=50,
            in_port=1,
            eth_type=0x800,
            ip_proto=6,
            tcp_dst=80,
            actions=[parser.OFPActionSetField(ipv4_dst="10.9.9.9"), parser.OFPActionOutput(3)],
        )
    )
    [(port, out)] = t.process(PKT, 1)
    assert (port, out["ipv4_dst"], out["ipv4_src"]) == (3, "10.9.9.9", "10.0.0.1")
    assert t.process(PKT, 2) == [("NORMAL", PKT)]
    assert t.process(dict(PKT, tcp_dst=81), 1) == [("NORMAL", dict(PKT, tcp_dst=81))]


def test_actions_apply_in_order_and_copies() -> None:
    t = FlowTable()
    t.apply(
        flow(
            in_port=1,
            eth_type=0x800,
            actions=[
                parser.OFPActionOutput(2),
                parser.OFPActionSetField(ipv4_src="1.2.3.4"),
                parser.OFPActionOutput(3),
            ],
        )
    )
    outs = t.process(PKT, 1)
    assert [(p, o["ipv4_src"]) for p, o in outs] == [(2, "10.0.0.1"), (3, "1.2.3.4")]
    assert PKT["ipv4_src"] == "10.0.0.1"


def test_no_output_back_to_ingress_port() -> None:
    t = FlowTable()
    t.apply(flow(actions=[parser.OFPActionOutput(1)]))
    assert t.process(PKT, 1) == []
    t.apply(flow(actions=[parser.OFPActionOutput(ofp.OFPP_IN_PORT)]))
    assert t.process(PKT, 1) == [(1, PKT)]


def test_masked_match() -> None:
    t = FlowTable()
    t.apply(flow(eth_type=0x800, ipv4_dst=("10.0.0.0", "255.255.255.252")))
    assert t.process(PKT, 1)
    assert not t.process(dict(PKT, ipv4_dst="10.0.0.4"), 1)


def test_missing_field_does_not_match() -> None:
    t = FlowTable()
    t.apply(flow(eth_type=0x800, ip_proto=17, udp_dst=80))
    assert t.process(PKT, 1) == []


@pytest.mark.parametrize(
    "match",
    [
        {"tcp_dst": 80},
        {"ipv4_src": "10.0.0.1"},
        {"eth_type": 0x800, "ip_proto": 17, "tcp_dst": 80},
        {"arp_tpa": "10.0.0.1"},
    ],
)
def test_prerequisites_enforced_like_ovs(match: dict) -> None:
    with pytest.raises(FlowSimError, match="PREREQ"):
        FlowTable().apply(flow(**match))


def test_set_field_needs_consistent_match() -> None:
    with pytest.raises(FlowSimError, match="MATCH_INCONSISTENT"):
        FlowTable().apply(flow(in_port=1, actions=[parser.OFPActionSetField(ipv4_src="1.1.1.1")]))


def test_add_replaces_identical_match_and_priority() -> None:
    t = FlowTable()
    t.apply(flow(cookie=1, in_port=1))
    t.apply(flow(cookie=2, in_port=1, actions=[parser.OFPActionOutput(5)]))
    t.apply(flow(cookie=3, priority=11, in_port=1))
    assert sorted(f.cookie for f in t.flows) == [2, 3]


def test_delete_by_cookie_mask_non_strict_and_strict() -> None:
    t = FlowTable()
    for cookie, port in ((0x1_0001, 1), (0x1_0002, 2), (0x2_0001, 3)):
        t.apply(flow(cookie=cookie, in_port=port))
    t.apply(delete(cookie=0x1_0000, cookie_mask=0xF_0000))
    assert [f.cookie for f in t.flows] == [0x2_0001]
    t.apply(flow(cookie=5, in_port=1, eth_type=0x800))
    t.apply(delete(strict=True, in_port=1))  # strict: needs the exact match, this one has more
    assert len(t.flows) == 2
    t.apply(delete(in_port=1))  # non-strict: every flow at least as specific
    assert [f.cookie for f in t.flows] == [0x2_0001]
    t.apply(delete(strict=True, in_port=3))
    assert t.flows == []


def test_delete_out_port_filter_and_modify() -> None:
    t = FlowTable()
    t.apply(flow(in_port=1, actions=[parser.OFPActionOutput(2)]))
    t.apply(flow(in_port=3, actions=[parser.OFPActionOutput(4)]))
    t.apply(delete(out_port=4))
    assert [f.match["in_port"] for f in t.flows] == [1]
    t.apply(flow(command=ofp.OFPFC_MODIFY, actions=[parser.OFPActionOutput(7)]))
    assert t.process(PKT, 1) == [(7, PKT)]
    t.apply(flow(command=ofp.OFPFC_MODIFY_STRICT, in_port=9, actions=[parser.OFPActionOutput(8)]))
    assert t.process(PKT, 1) == [(7, PKT)] and len(t.flows) == 1


def test_meters_checked_and_delete_removes_users() -> None:
    t = FlowTable()
    with pytest.raises(FlowSimError, match="INVALID_METER"):
        t.apply(flow(meter=4, in_port=1))
    add = parser.OFPMeterMod(
        None, command=ofp.OFPMC_ADD, flags=ofp.OFPMF_KBPS, meter_id=4, bands=[parser.OFPMeterBandDrop(rate=1000)]
    )
    t.apply(add)
    with pytest.raises(FlowSimError, match="METER_EXISTS"):
        t.apply(add)
    t.apply(flow(meter=4, in_port=1))
    assert t.process(PKT, 1) == [(2, PKT)]  # a meter does not change forwarding here
    t.apply(parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=4))
    assert t.flows == [] and t.meters == {}
    t.apply(parser.OFPMeterMod(None, command=ofp.OFPMC_DELETE, meter_id=99))  # unknown: no error
    with pytest.raises(FlowSimError, match="UNKNOWN_METER"):
        t.apply(parser.OFPMeterMod(None, command=ofp.OFPMC_MODIFY, meter_id=5))


def test_counters_timeouts_and_stats() -> None:
    t = FlowTable()
    fm = flow(cookie=9, in_port=1)
    fm.hard_timeout = 10
    t.apply(fm, now=100.0)
    t.process(PKT, 1, size=100)
    t.process(PKT, 1, size=50)
    [stats] = t.stats(cookie=9, cookie_mask=0xFF, now=102.5)
    assert (stats.packet_count, stats.byte_count, stats.duration_sec, stats.cookie) == (2, 150, 2, 9)
    assert t.stats(cookie=8, cookie_mask=0xFF) == []
    assert t.expire(109.9) == []
    assert len(t.expire(110.0)) == 1 and t.flows == []
    assert t.removed[-1][1] == "hard_timeout"


def test_unsupported_things_fail_loudly() -> None:
    with pytest.raises(FlowSimError):
        FlowTable().apply(parser.OFPFlowMod(None, table_id=ofp.OFPTT_ALL, match=parser.OFPMatch()))
    with pytest.raises(FlowSimError):
        FlowTable().apply(flow(actions=[parser.OFPActionPushVlan()]))
    with pytest.raises(FlowSimError):
        FlowTable().apply(parser.OFPEchoRequest(None))


def test_non_strict_delete_spares_less_specific_flows() -> None:
    t = FlowTable()
    t.apply(flow(cookie=1, eth_type=0x800, ipv4_dst=("10.0.0.0", "255.255.255.0")))
    t.apply(flow(cookie=2, eth_type=0x800, ipv4_dst="10.0.0.0"))
    t.apply(delete(eth_type=0x800, ipv4_dst="10.0.0.0"))  # covers only the exact flow
    assert [f.cookie for f in t.flows] == [1]
    t.apply(delete(eth_type=0x800, ipv4_dst=("10.0.0.0", "255.0.0.0")))  # covers the /24
    assert t.flows == []


def test_re_add_keeps_counters_and_modify_restarts_the_timeout_clock() -> None:
    """OF1.3 (and OVS 3.1, measured): an ADD replacing an identical flow copies its counters
    unless RESET_COUNTS; MODIFY keeps counters and duration and restarts the hard-timeout clock."""
    t = FlowTable()
    first = flow(cookie=1, in_port=1)
    first.hard_timeout = 100
    t.apply(first, now=0.0)
    t.process(PKT, 1, size=10)
    again = flow(cookie=1, in_port=1)
    again.hard_timeout = 100
    t.apply(again, now=50.0)
    [stats] = t.stats(now=60.0)
    assert (stats.packet_count, stats.duration_sec) == (1, 10)
    reset = flow(cookie=1, in_port=1)
    reset.flags = ofp.OFPFF_RESET_COUNTS
    t.apply(reset, now=60.0)
    assert t.stats()[0].packet_count == 0
    t.process(PKT, 1)
    timed = flow(cookie=2, in_port=2)
    timed.hard_timeout = 100
    t.apply(timed, now=0.0)
    t.apply(flow(command=ofp.OFPFC_MODIFY_STRICT, in_port=2, actions=[parser.OFPActionOutput(5)]), now=80.0)
    assert t.expire(150.0) == []  # the clock restarted at 80
    [entry] = [e for e in t.flows if e.cookie == 2]
    assert entry.installed_at == 0.0 and t.process(PKT, 2) == [(5, PKT)]
    assert [e.cookie for e in t.expire(180.0)] == [2]


# ---- tables and the conntrack model --------------------------------------------------------
def test_ct_commit_nat_and_reply_recirculation() -> None:
    from viplanes.controller.compile import conntrack as ct

    t = FlowTable()
    t.apply(
        flow(priority=10, in_port=1, eth_type=0x800, actions=[ct.commit(5, "192.0.2.9", 0x2009)])
    )  # a NAT'd commit goes on in the egress table
    t.apply(
        parser.OFPFlowMod(
            None,
            table_id=ct.CT_EGRESS_TABLE,
            priority=10,
            match=parser.OFPMatch(eth_type=0x800, ct_state=(ct.CT_TRK, ct.CT_TRK | ct.CT_INV)),
            instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(2)])],
        )
    )
    t.apply(flow(priority=10, in_port=2, eth_type=0x800, actions=[ct.track_reply(0x2009)]))
    est = parser.OFPFlowMod(
        None,
        table_id=1,
        priority=10,
        match=parser.OFPMatch(eth_type=0x800, ct_state=ct.REPLY_ESTABLISHED, ct_mark=5),
        instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(1)])],
    )
    t.apply(est)
    [(port, sent)] = t.process(
        ip_packet("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "203.0.113.1", "tcp", 40000, 80), 1
    )
    assert (port, sent["ipv4_src"]) == (2, "192.0.2.9") and "ct_state" not in sent
    reply = ip_packet("02:00:00:00:00:02", "02:00:00:00:00:01", "203.0.113.1", "192.0.2.9", "tcp", 80, 40000)
    [(port, back)] = t.process(reply, 2)
    assert (port, back["ipv4_dst"]) == (1, "10.0.0.1")  # un-NATed after recirculation
    assert t.process(dict(reply, tcp_dst=40001), 2) == []  # no connection: +new, table-1 miss
    assert sorted(e.table_id for e in t.flows) == [0, 0, 1, 2]
    # a packet conntrack finds invalid (SYN+FIN opens nothing) is neither committed nor NAT'd:
    # the egress table's ct_state match refuses it
    bogus = dict(
        ip_packet("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "203.0.113.1", "tcp", 40002, 80),
        tcp_flags=0x003,
    )
    assert t.process(bogus, 1) == []


def test_ct_mark_of_another_lane_does_not_match() -> None:
    from viplanes.controller.compile import conntrack as ct

    t = FlowTable()
    t.apply(
        flow(priority=10, in_port=1, eth_type=0x800, actions=[ct.commit(6, None, 0x1000), parser.OFPActionOutput(2)])
    )
    t.apply(flow(priority=10, in_port=2, eth_type=0x800, actions=[ct.track_reply(0x1000)]))
    t.apply(
        parser.OFPFlowMod(
            None,
            table_id=1,
            priority=10,
            match=parser.OFPMatch(eth_type=0x800, ct_state=ct.REPLY_ESTABLISHED, ct_mark=5),
            instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(1)])],
        )
    )
    t.process(ip_packet("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "203.0.113.1"), 1)
    back = ip_packet("02:00:00:00:00:02", "02:00:00:00:00:01", "203.0.113.1", "10.0.0.1", "tcp", 5201, 40000)
    assert t.process(back, 2) == []
