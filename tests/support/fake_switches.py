"""Fake switches, the two kinds the tests use.

In memory, for runtime/app tests: ``FakeSwitches``, the flow tables of ``netsim.Network``
answering like OVS. ``FakeSwitches.send`` is a ``LaneRuntime.send``: FlowMods/MeterMods go into the
simulated tables (a message the simulator refuses becomes an OFPErrorMsg for its xid), barriers
are answered unless the switch is ``mute``, flow-stats requests are answered from the table.
Replies go straight back into the runtime, like os-ken's event thread would.

Over the wire, for attack tests: ``FakeSwitch``, a hostile OpenFlow 1.3 "switch" (plain sockets +
ssl, messages packed by hand). It plays just enough of a switch to be served: hello, features
reply with the dpid it claims, empty port-desc and flow-stats replies, barrier and echo replies.
It counts what the controller sends it (flow-mods, barriers, packet-outs), so a test can prove an
impostor got nothing. Single-threaded: ``pump`` reads and answers until a deadline or until the
controller closes.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
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


def rerouting_runtime(topo: Topology, hold_down_s: float = 2.0) -> tuple[FakeClock, FakeSwitches, LaneRuntime]:
    """An :func:`inline_runtime` over reconciled fake switches whose controller re-route runs
    inline too (links held down ``hold_down_s``): the set-up of every re-route test."""
    from viplanes.controller.runtime.links import LinkBook, LinkSettings
    from viplanes.controller.runtime.reroute import Reroute

    clock = FakeClock()
    switches = FakeSwitches(topo, clock)
    rt = inline_runtime(topo, clock, switches, base_flows=True)
    book = LinkBook(topo, LinkSettings(hold_down_s=hold_down_s), clock)
    rt.reroute = Reroute(rt.state, rt.wire, rt.resync, book, topo, start=lambda fn: None)
    return clock, switches, rt


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


# ---- over the wire: a hostile switch -------------------------------------------------------
HEADER = 8


def client_context(ca: Path | None, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    """TLS client side as ovs-vswitchd does it: checks the controller against ``ca`` (or not)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    if ca is not None:
        ctx.load_verify_locations(cafile=str(ca))
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def message(msg_type: int, body: bytes = b"", xid: int = 0) -> bytes:
    return struct.pack("!BBHI", ofp.OFP_VERSION, msg_type, HEADER + len(body), xid) + body


def arp_request_packet_in(target_ip: str, in_port: int = 1) -> bytes:
    """A PACKET_IN carrying an ARP request for ``target_ip`` (what the edge router would punt)."""
    sender_mac = bytes.fromhex("020000030001")
    frame = (
        b"\xff" * 6
        + sender_mac
        + b"\x08\x06"
        + struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)
        + sender_mac
        + socket.inet_aton("198.51.100.1")
        + b"\0" * 6
        + socket.inet_aton(target_ip)
    )
    return packet_in(frame, in_port)


def packet_in(frame: bytes, in_port: int = 1) -> bytes:
    """A raw OF1.3 PACKET_IN carrying ``frame``, as if punted from ``in_port``."""
    oxm = struct.pack("!HBBI", 0x8000, ofp.OFPXMT_OFB_IN_PORT << 1, 4, in_port)
    match = struct.pack("!HH", ofp.OFPMT_OXM, 4 + len(oxm)) + oxm
    match += b"\0" * ((8 - len(match) % 8) % 8)
    body = struct.pack("!IHBBQ", ofp.OFP_NO_BUFFER, len(frame), ofp.OFPR_ACTION, 0, 0)
    return message(ofp.OFPT_PACKET_IN, body + match + b"\0\0" + frame)


class FakeSwitch:
    def __init__(self, port: int, dpid: int, ctx: ssl.SSLContext | None, answer_echo: bool = True) -> None:
        self.dpid = dpid
        self.answer_echo = answer_echo
        self.received: Counter[int] = Counter()  # message type -> count
        self.closed = False
        raw = socket.create_connection(("127.0.0.1", port), timeout=5)
        # raises ssl.SSLError / OSError when the controller refuses the handshake
        self.sock = ctx.wrap_socket(raw) if ctx is not None else raw
        self.sock.settimeout(0.2)
        self._buf = bytearray()
        self.send(message(ofp.OFPT_HELLO, struct.pack("!HHI", 1, 8, 1 << ofp.OFP_VERSION)))

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def _reply(self, msg_type: int, xid: int, body: bytes) -> None:
        if msg_type == ofp.OFPT_FEATURES_REQUEST:
            self.send(message(ofp.OFPT_FEATURES_REPLY, struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0x4F, 0), xid))
        elif msg_type == ofp.OFPT_ECHO_REQUEST and self.answer_echo:
            self.send(message(ofp.OFPT_ECHO_REPLY, body, xid))
        elif msg_type == ofp.OFPT_BARRIER_REQUEST:
            self.send(message(ofp.OFPT_BARRIER_REPLY, b"", xid))
        elif msg_type == ofp.OFPT_MULTIPART_REQUEST:
            mp_type = struct.unpack_from("!H", body, 0)[0]
            self.send(message(ofp.OFPT_MULTIPART_REPLY, struct.pack("!HH4x", mp_type, 0), xid))

    def pump(self, seconds: float, until_closed: bool = False) -> bool:
        """Read and answer for ``seconds``; True if the controller closed the connection."""
        deadline = time.monotonic() + seconds
        self.sock.settimeout(max(0.001, min(0.2, seconds)))
        while not self.closed:
            try:
                chunk = self.sock.recv(65536)
            except (TimeoutError, ssl.SSLWantReadError):
                if time.monotonic() >= deadline:
                    break
                continue
            except OSError:
                self.closed = True
                break
            if not chunk:
                self.closed = True
                break
            self._buf += chunk
            while len(self._buf) >= HEADER:
                _v, msg_type, length, xid = struct.unpack_from("!BBHI", self._buf, 0)
                if len(self._buf) < length:
                    break
                body = bytes(self._buf[HEADER:length])
                del self._buf[:length]
                self.received[msg_type] += 1
                self._reply(msg_type, xid, body)
            if time.monotonic() >= deadline:
                break
        return self.closed

    @property
    def flow_mods(self) -> int:
        return self.received[ofp.OFPT_FLOW_MOD]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
