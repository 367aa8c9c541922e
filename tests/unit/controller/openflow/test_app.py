"""Smoke test of the os-ken app: every event handler driven with fake datapaths (Faucet style).

The fake datapaths serialise what the app sends (as os-ken would), apply flow/meter mods to the
simulator's tables, and answer barriers and flow-stats through the app's own handlers.
"""

from __future__ import annotations

import logging
import time

import pytest
from os_ken.controller import ofp_event
from os_ken.controller.handler import DEAD_DISPATCHER, MAIN_DISPATCHER
from os_ken.lib.packet import arp, packet
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import FakeClock
from tests.support.fake_switches import arp_request
from tests.support.flowsim import FlowSimError
from tests.support.netsim import Network
from viplanes.controller.compile.lane import lane_cookie
from viplanes.controller.openflow.app import VipLanesApp
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

NAT_IP = "198.51.100.200"


class FakeDatapath:
    def __init__(self, dpid: int, app: VipLanesApp, net: Network) -> None:
        self.id = dpid
        self.app_topology = net.topo
        self.port_descs = 0
        self.ofproto, self.ofproto_parser = ofp, parser
        self.address = ("127.0.0.1", 40000 + dpid)
        self.app, self.table = app, net.tables.get(dpid)
        self.sent: list = []
        self.closed = False
        self._xid = 0

    def set_xid(self, msg) -> int:
        self._xid += 1
        msg.set_xid(self._xid)
        return self._xid

    def send_msg(self, msg) -> bool:
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()  # what os-ken does: proves the message was bound to this datapath
        assert msg.datapath is self
        self.sent.append(msg)
        if isinstance(msg, (parser.OFPFlowMod, parser.OFPMeterMod, parser.OFPGroupMod)):
            try:
                self.table.apply(msg, 0.0)
            except FlowSimError:
                err = parser.OFPErrorMsg(self, type_=ofp.OFPET_FLOW_MOD_FAILED, code=0)
                err.xid = msg.xid
                self.app._error(ofp_event.EventOFPErrorMsg(err))
        elif isinstance(msg, parser.OFPBarrierRequest):
            reply = parser.OFPBarrierReply(self)
            reply.xid = msg.xid
            self.app._barrier_reply(ofp_event.EventOFPBarrierReply(reply))
        elif isinstance(msg, parser.OFPGroupDescStatsRequest):
            groups = [
                parser.OFPGroupDescStats(type_=g.type, group_id=g.group_id, buckets=g.buckets)
                for g in self.table.groups.values()
            ]
            reply = parser.OFPGroupDescStatsReply(self, flags=0, body=groups)
            reply.xid = msg.xid
            self.app._group_desc(ofp_event.EventOFPGroupDescStatsReply(reply))
        elif isinstance(msg, parser.OFPPortDescStatsRequest):
            self.port_descs += 1  # asked on connect (read_ports): answered in two parts, all up
            ports = [port_desc(p, 0) for p in switch_ports(self.app_topology, self.id)]
            for part, flags in ((ports[:1], ofp.OFPMPF_REPLY_MORE), (ports[1:], 0)):
                reply = parser.OFPPortDescStatsReply(self, flags=flags, body=part)
                reply.xid = msg.xid
                self.app._port_desc(ofp_event.EventOFPPortDescStatsReply(reply))
        elif isinstance(msg, parser.OFPFlowStatsRequest):
            body = self.table.stats(msg.cookie, msg.cookie_mask, 0.0)
            half = len(body) // 2  # two parts: exercises OFPMPF_REPLY_MORE
            for part, flags in ((body[:half], ofp.OFPMPF_REPLY_MORE), (body[half:], 0)):
                reply = parser.OFPFlowStatsReply(self, flags=flags, body=part)
                reply.xid = msg.xid
                self.app._flow_stats(ofp_event.EventOFPFlowStatsReply(reply))
        return True

    def close(self) -> None:  # os-ken's Datapath: the app shuts our GuardedDatapath down instead
        self.closed = True


def switch_ports(topo: Topology, dpid: int) -> list[int]:
    """The switch's declared ports: its link ends and host attachments."""
    name = next(s.name for s in topo.switches if s.dpid == dpid)
    ends = [e for link in topo.links for e in (link.a, link.b)] + [h.iface.attach for h in topo.hosts]
    return sorted({e.port for e in ends if e is not None and e.switch == name})


def port_desc(port_no: int, st: int) -> parser.OFPPort:
    return parser.OFPPort(
        port_no=port_no,
        hw_addr=f"02:00:00:00:00:{port_no:02x}",
        name=f"eth{port_no}".encode(),
        config=0,
        state=st,
        curr=0,
        advertised=0,
        supported=0,
        peer=0,
        curr_speed=0,
        max_speed=0,
    )


def features(dp: FakeDatapath):
    return ofp_event.EventOFPSwitchFeatures(
        parser.OFPSwitchFeatures(dp, datapath_id=dp.id, n_buffers=0, n_tables=254, auxiliary_id=0, capabilities=0)
    )


def state(dp: FakeDatapath, st: str):
    ev = ofp_event.EventOFPStateChange(dp)
    ev.state = st
    return ev


def packet_in(dp: FakeDatapath, in_port: int, data: bytes):
    msg = parser.OFPPacketIn(
        dp,
        buffer_id=ofp.OFP_NO_BUFFER,
        total_len=len(data),
        reason=ofp.OFPR_ACTION,
        table_id=0,
        cookie=0,
        match=parser.OFPMatch(in_port=in_port),
        data=data,
    )
    return ofp_event.EventOFPPacketIn(msg)


def fake_datapaths(app: VipLanesApp, topo: Topology, dpids: tuple[int, ...]) -> tuple[Network, dict[int, FakeDatapath]]:
    """The simulated campus and a fake datapath on it for each of ``dpids``, talking to ``app``."""
    net = Network(topo)
    return net, {d: FakeDatapath(d, app, net) for d in dpids}


@pytest.fixture
def app_campus(topo: Topology):
    clock = FakeClock()
    runtime = LaneRuntime(topo, clock=clock, spawn=lambda fn: fn())
    app = VipLanesApp(switch_events=runtime)
    net, dps = fake_datapaths(app, topo, (1, 2, 3, 4))
    return app, runtime, net, dps, clock


def test_every_handler(app_campus, topo: Topology, caplog: pytest.LogCaptureFixture) -> None:
    app, runtime, net, dps, clock = app_campus
    caplog.set_level(logging.INFO, logger="viplanes")
    # connect: registry, the log line procs.py greps, base flows reconciled in
    for dp in dps.values():
        app._switch_features(features(dp))
    assert set(app.datapaths) == {1, 2, 3, 4} == runtime.connected
    assert "switch connected dpid=3" in caplog.text
    assert all(net.tables[d].flows for d in dps)
    # each asked its ports once; the two-part answer came back through _port_desc (not a timeout)
    assert [dp.port_descs for dp in dps.values()] == [1, 1, 1, 1]
    assert "did not describe its ports" not in caplog.text
    for dp in dps.values():
        app._state_change(state(dp, MAIN_DISPATCHER))  # no-op for live switches
    # a lane, confirmed by barriers that came back through _barrier_reply
    lane = LaneSpec(1, "10.1.0.10", "203.0.113.10", "tcp", 5201, None, NAT_IP, clock.now + 600)
    assert runtime.activate(lane).ok
    assert [e for e in net.tables[2].flows if e.cookie == lane_cookie(1)]
    # counters ask flow stats in two parts (REPLY_MORE) and get them both
    assert runtime.counters(1).packets == 0

    # proxy ARP: the edge router asks for the lane address at s3 port 2 -> packet-out there
    s3 = dps[3]
    n = len(s3.sent)
    app._packet_in(packet_in(s3, 2, arp_request(topo, NAT_IP)))
    (out,) = s3.sent[n:]
    assert isinstance(out, parser.OFPPacketOut)
    assert [a.port for a in out.actions] == [2]
    reply = packet.Packet(out.data).get_protocol(arp.arp)
    assert (reply.opcode, reply.src_ip, reply.src_mac) == (arp.ARP_REPLY, NAT_IP, topo.lane_pool.mac)
    # ... but not for a pool address no lane uses, and not for junk
    app._packet_in(packet_in(s3, 2, arp_request(topo, "198.51.100.201")))
    app._packet_in(packet_in(s3, 2, b"\x00" * 7))
    assert len(s3.sent) == n + 1

    # flow removed (hard timeout) is noted
    removed = parser.OFPFlowRemoved(
        s3,
        cookie=lane_cookie(1),
        priority=1000,
        reason=ofp.OFPRR_HARD_TIMEOUT,
        table_id=0,
        duration_sec=600,
        duration_nsec=0,
        idle_timeout=0,
        hard_timeout=600,
        packet_count=0,
        byte_count=0,
        match=parser.OFPMatch(),
    )
    app._flow_removed(ofp_event.EventOFPFlowRemoved(removed))
    assert runtime.removed[-1][1:] == (3, 1, ofp.OFPRR_HARD_TIMEOUT)

    # port status and an unsolicited error are logged, nothing else
    port = port_desc(2, ofp.OFPPS_LINK_DOWN)
    app._port_status(ofp_event.EventOFPPortStatus(parser.OFPPortStatus(s3, reason=ofp.OFPPR_MODIFY, desc=port)))
    assert "dpid=3 port 2 modified" in caplog.text
    err = parser.OFPErrorMsg(s3, type_=ofp.OFPET_BAD_REQUEST, code=1)
    err.xid = 123456
    app._error(ofp_event.EventOFPErrorMsg(err))
    assert "OFPET_BAD_REQUEST" in caplog.text

    # the same dpid connecting again: newest connection wins, the old one is closed
    again = FakeDatapath(2, app, net)
    app._switch_features(features(again))
    assert dps[2].closed and app.datapaths[2] is again
    app._state_change(state(dps[2], DEAD_DISPATCHER))  # the old one dying changes nothing
    assert app.datapaths[2] is again and 2 in runtime.connected

    # disconnect: forgotten by the app and the runtime; lanes through it fail after the bounded
    # wait for the switch to come back (switch_wait_s), not at a barrier timeout
    app._state_change(state(again, DEAD_DISPATCHER))
    assert 2 not in app.datapaths and 2 not in runtime.connected
    assert "switch disconnected dpid=2" in caplog.text
    runtime.switch_wait_s = 0.2  # the bound itself is tested in test_readiness; here: it is the one used
    t0 = time.monotonic()
    result = runtime.activate(
        LaneSpec(2, "10.1.0.20", "203.0.113.10", "tcp", 5202, None, "198.51.100.201", clock.now + 600)
    )
    assert not result.ok and result.reason == "switch s2 (dpid 2) not connected"
    assert runtime.switch_wait_s <= time.monotonic() - t0 < runtime.switch_wait_s + 2
    assert app.send_ofmsgs(2, [parser.OFPBarrierRequest(None)]) is False


def test_standalone_app_installs_table_miss_only(topo: Topology) -> None:
    app = VipLanesApp()  # what `python -m viplanes.cli.osken` runs
    app.switch_events.spawn = lambda fn: fn()
    _net, dps = fake_datapaths(app, topo, (1,))
    dp = dps[1]
    app._switch_features(features(dp))
    mods = [m for m in dp.sent if isinstance(m, parser.OFPFlowMod)]
    assert [(m.priority, m.instructions[0].actions[0].port) for m in mods] == [(0, ofp.OFPP_NORMAL)]


def test_features_before_os_kens_handler_set_the_dpid(app_campus) -> None:
    """os-ken's handshake app sets ``dp.id`` on its own event thread; ours may handle the same
    features reply first. The switch must still be registered under its dpid, and be ready."""
    app, runtime, net, dps, _ = app_campus
    dp = dps[3]
    event = features(dp)
    dp.id = None  # os-ken's thread has not run yet
    app._switch_features(event)
    assert app.datapaths.get(3) is dp and None not in app.datapaths and dp.id == 3
    assert 3 in runtime.connected and 3 in runtime.reconciled  # reconciled: sendable, ready
