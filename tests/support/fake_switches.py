"""Fake switches for runtime/app tests: the flow tables of ``netsim.Network`` answering like OVS.

``FakeSwitches.send`` is a ``LaneRuntime.send``: FlowMods/MeterMods go into the simulated tables
(a message the simulator refuses becomes an OFPErrorMsg for its xid), barriers are answered
unless the switch is ``mute``, flow-stats requests are answered from the table. Replies go
straight back into the runtime, like os-ken's event thread would.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from os_ken.lib.packet import arp, ether_types, ethernet, packet
from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support.clock import T0, FakeClock
from tests.support.flowsim import FlowSimError
from tests.support.groupsim import GroupSimError
from tests.support.netsim import Network
from viplanes.controller.compile.lane import lane_cookie
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

CLOUD = "203.0.113.10"  # the cloud host every runtime test sends to
NAT_IP = "198.51.100.200"  # the NAT address of its lanes


def inline_runtime(topo: Topology, clock: FakeClock, switches: FakeSwitches, base_flows: bool = False) -> LaneRuntime:
    """A runtime wired to ``switches`` that runs spawned work inline, so a test sees its effects at once.

    ``base_flows`` reconciles every switch first (NORMAL, bypass drops, the ARP punt).
    """
    runtime = switches.attach(LaneRuntime(topo, clock=clock, spawn=lambda fn: fn()))
    if base_flows:
        for dpid in sorted(switches.net.tables):
            runtime.reconcile_switch(dpid)
    return runtime


def arp_request(topo: Topology, target: str) -> bytes:
    """The edge router's broadcast ARP who-has ``target``, as raw frame bytes."""
    edge = topo.edge.inside
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst="ff:ff:ff:ff:ff:ff", src=edge.mac, ethertype=ether_types.ETH_TYPE_ARP))
    pkt.add_protocol(
        arp.arp(
            opcode=arp.ARP_REQUEST, src_mac=edge.mac, src_ip=str(edge.ip.ip), dst_mac="00:00:00:00:00:00", dst_ip=target
        )
    )
    pkt.serialize()
    return bytes(pkt.data)


class FakeSwitches:
    def __init__(self, topo: Topology, clock: FakeClock, network: Network | None = None) -> None:
        self.net = network or Network(topo)
        self.clock = clock
        self.mute: set[int] = set()  # switches that never answer barriers
        self.refuse: Callable[[int, Any], bool] = lambda dpid, msg: False  # extra refusals
        self.sent: list[tuple[int, Any]] = []
        self.runtime: LaneRuntime | None = None
        self.topo = topo
        self.down_ports: set[tuple[int, int]] = set()  # (dpid, port) described as link down

    def attach(self, runtime: LaneRuntime, connect: bool = True) -> LaneRuntime:
        self.runtime = runtime
        runtime.send = self.send
        if connect:
            runtime.connected.update(self.net.tables)
        return runtime

    def send(self, dpid: int, ofmsgs: list[Any]) -> bool:
        rt = self.runtime
        assert rt is not None
        if dpid not in rt.connected:
            return False
        table = self.net.tables[dpid]
        for msg in ofmsgs:
            self.sent.append((dpid, msg))
            if isinstance(msg, parser.OFPBarrierRequest):
                if dpid not in self.mute:
                    rt.on_barrier_reply(dpid, msg.xid)
            elif isinstance(msg, parser.OFPAggregateStatsRequest):
                flows = table.stats(msg.cookie, msg.cookie_mask, self.clock())
                rt.on_flow_stats(dpid, msg.xid, [SimpleNamespace(flow_count=len(flows))], False)
            elif isinstance(msg, parser.OFPFlowStatsRequest):
                body = table.stats(msg.cookie, msg.cookie_mask, self.clock())
                rt.on_flow_stats(dpid, msg.xid, body, more=False)
            elif isinstance(msg, parser.OFPPortDescStatsRequest):
                rt.on_flow_stats(dpid, msg.xid, self.port_desc(dpid), more=False)
            elif isinstance(msg, parser.OFPGroupDescStatsRequest):
                body = [
                    parser.OFPGroupDescStats(type_=g.type, group_id=g.group_id, buckets=g.buckets)
                    for g in table.groups.values()
                ]
                rt.on_flow_stats(dpid, msg.xid, body, more=False)
            else:
                try:
                    if self.refuse(dpid, msg):
                        raise FlowSimError("refused by the test")
                    table.apply(msg, self.clock())
                except GroupSimError as exc:
                    rt.on_error(dpid, msg.xid, ofp.OFPET_GROUP_MOD_FAILED, exc.code)
                except FlowSimError:
                    err_type = (
                        ofp.OFPET_METER_MOD_FAILED if isinstance(msg, parser.OFPMeterMod) else ofp.OFPET_FLOW_MOD_FAILED
                    )
                    rt.on_error(dpid, msg.xid, err_type, 0)
        return True

    def port_desc(self, dpid: int) -> list[Any]:
        """The switch's ports (its link ends and attachments) as OFPMP_PORT_DESC describes them."""
        sw = next(s for s in self.topo.switches if s.dpid == dpid)
        ends = [e for link in self.topo.links for e in (link.a, link.b)]
        ends += [h.iface.attach for h in self.topo.hosts if h.iface.attach]
        ports = sorted({e.port for e in ends if e is not None and e.switch == sw.name})
        return [
            SimpleNamespace(port_no=p, state=ofp.OFPPS_LINK_DOWN if (dpid, p) in self.down_ports else 0, config=0)
            for p in ports
        ]

    def sent_types(self, dpid: int | None = None) -> list[str]:
        return [type(m).__name__ for d, m in self.sent if dpid is None or d == dpid]


def spec(lane_id: int = 1, expires_in: float = 3600.0, now: float = T0, **kw: Any) -> LaneSpec:
    """Desktop to the cloud host on tcp/5201 through the NAT pool, ``expires_in`` from ``now``."""
    fields = dict(
        lane_id=lane_id,
        src_ip="10.1.0.10",
        dst_ip=CLOUD,
        protocol="tcp",
        dst_port=5201,
        src_port=None,
        nat_ip=NAT_IP,
        expires_at=now + expires_in,
    )
    fields.update(kw)
    return LaneSpec(**fields)


def lane_flows(switches: FakeSwitches, dpid: int, lane_id: int, table_id: int = 0) -> list:
    """The lane's flows in one table (table 0: forward + reverse; 1: conntrack replies)."""
    return [e for e in switches.net.tables[dpid].flows if e.cookie == lane_cookie(lane_id) and e.table_id == table_id]
