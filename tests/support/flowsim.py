"""A small OpenFlow 1.3 flow-table simulator, so tests ask "would this packet leave on port 3,
rewritten to X?" instead of comparing message strings.

Tables per switch, with the semantics the compiler relies on: priorities, exact and masked
matches with prerequisites (a flow OVS would reject is rejected here too), ADD / MODIFY / DELETE
with strict and non-strict matching, cookie filters, out_port filters, set-field and output
actions, hard timeouts, meters (checked to exist, then treated as no-ops), and Open vSwitch's
``ct()`` (``ctsim``: commit, nat, ct_mark, recirculation to another table; ``ct_state`` /
``ct_mark`` are per-switch metadata, gone when the packet leaves). ``NORMAL`` and ``CONTROLLER``
are outcomes, not simulated.

Packet conventions: a packet without ``vlan_vid`` is untagged (OFPVID_NONE); a tagged one
carries ``vlan_vid = 0x1000 | vid``. A TCP packet without ``tcp_flags`` is a mid-connection
segment (ACK); give ``tcp_flags=0x002`` for a bare SYN. An ICMP error quotes the packet it is
about as ``icmp_inner`` (a dict of fields).

The match fields (widths, prerequisites, conditions and "covers") are ``flowmatch``'s.
``Network`` walks a packet across a Topology: from a host's port through switches and links
until it reaches a host, a middlebox, the edge router, NORMAL, the controller, or is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from tests.support import groupsim
from tests.support.ctsim import Conntrack
from tests.support.flowmatch import PREREQS, Cond, conditions, covers, field_int, packet_value
from tests.support.flowmatch import FlowSimError as FlowSimError  # tests import it from here
from tests.support.packets import Packet as Packet
from tests.support.packets import canonical as canonical
from tests.support.packets import icmp6_error as icmp6_error
from tests.support.packets import icmp_error as icmp_error
from tests.support.packets import ip6_packet as ip6_packet
from tests.support.packets import ip_packet as ip_packet
from tests.support.packets import make_packet as make_packet

SPECIAL_PORTS = {
    ofp.OFPP_NORMAL: "NORMAL",
    ofp.OFPP_CONTROLLER: "CONTROLLER",
    ofp.OFPP_FLOOD: "FLOOD",
    ofp.OFPP_ALL: "ALL",
    ofp.OFPP_LOCAL: "LOCAL",
}
METADATA = ("ct_state", "ct_mark", "reg0")  # per switch: never leaves it
NX_VENDOR_ID, NXT_CT_FLUSH_ZONE = 0x00002320, 29
NX_CT_RECIRC_NONE = 0xFF


@dataclass
class FlowEntry:
    priority: int
    cookie: int
    match: Any  # the OFPMatch as installed
    conds: dict[str, Cond]
    instructions: list[Any]
    hard_timeout: int = 0
    idle_timeout: int = 0
    flags: int = 0
    installed_at: float = 0.0
    timeout_from: float = 0.0  # when the hard-timeout clock (re)started
    packet_count: int = 0
    byte_count: int = 0
    table_id: int = 0

    def matches(self, pkt: Packet, in_port: int) -> bool:
        for name, (v, m) in self.conds.items():
            raw = packet_value(name, pkt, in_port)
            if raw is None or field_int(name, raw) & m != v:
                return False
        return True

    def outputs_to(self, port: int) -> bool:
        return any(
            getattr(a, "port", None) == port for inst in self.instructions for a in getattr(inst, "actions", ()) or ()
        )

    def as_stats(self, now: float) -> Any:
        """The entry as the OFPFlowStats a switch would report (for reconcile tests)."""
        age = max(0.0, now - self.installed_at)
        return parser.OFPFlowStats(
            table_id=self.table_id,
            duration_sec=int(age),
            duration_nsec=int((age % 1) * 1e9),
            priority=self.priority,
            idle_timeout=self.idle_timeout,
            hard_timeout=self.hard_timeout,
            flags=self.flags,
            cookie=self.cookie,
            packet_count=self.packet_count,
            byte_count=self.byte_count,
            match=self.match,
            instructions=self.instructions,
        )


@dataclass
class FlowTable:
    """One switch's flow table and meter table."""

    flows: list[FlowEntry] = field(default_factory=list)
    meters: dict[int, Any] = field(default_factory=dict)
    removed: list[tuple[FlowEntry, str]] = field(default_factory=list)  # (entry, reason)
    conntrack: Conntrack = field(default_factory=Conntrack)
    # meters out of tokens: a flow using one drops the packet (a meter band's drop)
    exhausted: set[int] = field(default_factory=set)
    groups: dict[int, Any] = field(default_factory=dict)  # fast-failover groups (``groupsim``)
    down_ports: set[int] = field(default_factory=set)  # ports whose link is down (groups watch them)

    # ---- messages -----------------------------------------------------------------------
    def apply(self, msg: Any, now: float = 0.0) -> None:
        if isinstance(msg, parser.OFPFlowMod):
            self._flow_mod(msg, now)
        elif isinstance(msg, parser.OFPMeterMod):
            self._meter_mod(msg)
        elif isinstance(msg, parser.OFPGroupMod):  # like OVS: a deleted group's flows go too
            self.flows, dead = groupsim.apply_group_mod(self.groups, self.flows, msg)
            self.removed += [(e, "group_delete") for e in dead]
        elif isinstance(msg, parser.OFPBarrierRequest):
            pass
        elif (
            isinstance(msg, parser.OFPExperimenter)
            and (msg.experimenter, msg.exp_type) == (NX_VENDOR_ID, NXT_CT_FLUSH_ZONE)
            and len(msg.data) == 8
        ):
            self.conntrack.flush(int.from_bytes(msg.data[6:8], "big"))
        else:
            raise FlowSimError(f"unsupported message {type(msg).__name__}")

    def apply_all(self, ofmsgs: Iterable[Any], now: float = 0.0) -> None:
        for msg in ofmsgs:
            self.apply(msg, now)

    def _meter_mod(self, msg: Any) -> None:
        if msg.command == ofp.OFPMC_ADD:
            if msg.meter_id in self.meters:
                raise FlowSimError(f"OFPMMFC_METER_EXISTS: meter {msg.meter_id}")
            self.meters[msg.meter_id] = msg
        elif msg.command == ofp.OFPMC_MODIFY:
            if msg.meter_id not in self.meters:
                raise FlowSimError(f"OFPMMFC_UNKNOWN_METER: meter {msg.meter_id}")
            self.meters[msg.meter_id] = msg
        elif msg.command == ofp.OFPMC_DELETE:
            ids = set(self.meters) if msg.meter_id == ofp.OFPM_ALL else {msg.meter_id}
            for meter_id in ids:
                self.meters.pop(meter_id, None)
            # like OVS: deleting a meter deletes the flows that use it
            gone = [e for e in self.flows if self._meter_of(e) in ids]
            self.flows = [e for e in self.flows if e not in gone]
            self.removed += [(e, "meter_delete") for e in gone]

    @staticmethod
    def _meter_of(entry: FlowEntry) -> int | None:
        return next((i.meter_id for i in entry.instructions if isinstance(i, parser.OFPInstructionMeter)), None)

    def _check_instructions(self, instructions: list[Any], conds: dict[str, Cond]) -> None:
        for inst in instructions:
            if isinstance(inst, parser.OFPInstructionMeter):
                if inst.meter_id not in self.meters:
                    raise FlowSimError(f"OFPMMFC_INVALID_METER: meter {inst.meter_id} not defined")
            elif isinstance(inst, parser.OFPInstructionActions):
                if inst.type != ofp.OFPIT_APPLY_ACTIONS:
                    raise FlowSimError("only apply-actions is simulated")
                for action in inst.actions:
                    if isinstance(action, parser.OFPActionSetField):
                        need = PREREQS.get(action.key)
                        if need and (need[0] not in conds or conds[need[0]][0] not in need[1]):
                            raise FlowSimError(
                                f"OFPBAC_MATCH_INCONSISTENT: set {action.key} needs a match on {need[0]}"
                            )
                    elif isinstance(action, parser.OFPActionGroup):
                        if action.group_id not in self.groups:
                            raise FlowSimError(f"OFPBAC_BAD_OUT_GROUP: group {action.group_id:#x} not defined")
                    elif not isinstance(action, (parser.OFPActionOutput, parser.NXActionCT)):
                        raise FlowSimError(f"action {type(action).__name__} is not simulated")
            else:
                raise FlowSimError(f"instruction {type(inst).__name__} is not simulated")

    def _selected(self, msg: Any, conds: dict[str, Cond], strict: bool) -> list[FlowEntry]:
        out = []
        for entry in self.flows:
            if entry.cookie & msg.cookie_mask != msg.cookie & msg.cookie_mask:
                continue
            if msg.table_id != ofp.OFPTT_ALL and entry.table_id != msg.table_id:
                continue
            if strict:
                if entry.priority != msg.priority or entry.conds != conds:
                    continue
            elif not covers(conds, entry.conds):
                continue
            if (
                msg.command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT)
                and msg.out_port != ofp.OFPP_ANY
                and not entry.outputs_to(msg.out_port)
            ):
                continue
            out.append(entry)
        return out

    def _flow_mod(self, msg: Any, now: float) -> None:
        if msg.table_id > ofp.OFPTT_MAX + 1 or (
            msg.table_id == ofp.OFPTT_ALL and msg.command not in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT)
        ):
            raise FlowSimError(f"OFPFMFC_BAD_TABLE_ID: table {msg.table_id}")
        conds = conditions(msg.match)
        instructions = list(msg.instructions or [])
        reset = bool(msg.flags & ofp.OFPFF_RESET_COUNTS)
        if msg.command == ofp.OFPFC_ADD:
            self._check_instructions(instructions, conds)
            new = FlowEntry(
                msg.priority,
                msg.cookie,
                msg.match,
                conds,
                instructions,
                msg.hard_timeout,
                msg.idle_timeout,
                msg.flags,
                now,
                now,
                table_id=msg.table_id,
            )
            for old in [
                e for e in self.flows if e.priority == msg.priority and e.conds == conds and e.table_id == msg.table_id
            ]:
                # OF1.3: the replaced flow's counters carry over unless RESET_COUNTS; its
                # duration restarts
                if not reset:
                    new.packet_count, new.byte_count = old.packet_count, old.byte_count
                self.flows.remove(old)
            self.flows.append(new)
        elif msg.command in (ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT):
            self._check_instructions(instructions, conds)
            for entry in self._selected(msg, conds, msg.command == ofp.OFPFC_MODIFY_STRICT):
                # OF1.3 keeps cookie, timeouts, duration; OVS restarts the hard-timeout clock
                entry.instructions = instructions
                entry.timeout_from = now
                if reset:
                    entry.packet_count = entry.byte_count = 0
        elif msg.command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT):
            gone = self._selected(msg, conds, msg.command == ofp.OFPFC_DELETE_STRICT)
            self.flows = [e for e in self.flows if e not in gone]
            self.removed += [(e, "delete") for e in gone]
        else:
            raise FlowSimError(f"OFPFMFC_BAD_COMMAND: {msg.command}")

    def expire(self, now: float) -> list[FlowEntry]:
        """Drop flows whose hard_timeout has passed; returns them (FLOW_REMOVED candidates)."""
        gone = [e for e in self.flows if e.hard_timeout and e.timeout_from + e.hard_timeout <= now]
        self.flows = [e for e in self.flows if e not in gone]
        self.removed += [(e, "hard_timeout") for e in gone]
        return gone

    def stats(self, cookie: int = 0, cookie_mask: int = 0, now: float = 0.0) -> list[Any]:
        return [e.as_stats(now) for e in self.flows if e.cookie & cookie_mask == cookie & cookie_mask]

    # ---- packets --------------------------------------------------------------------------
    def lookup(self, pkt: Packet, in_port: int, table_id: int = 0) -> FlowEntry | None:
        best: FlowEntry | None = None
        for entry in self.flows:
            if (
                entry.table_id == table_id
                and entry.matches(pkt, in_port)
                and (best is None or entry.priority > best.priority)
            ):
                best = entry
        return best

    def process(
        self, pkt: Mapping[str, Any], in_port: int, size: int = 1500, table_id: int = 0
    ) -> list[tuple[int | str, Packet]]:
        """Outputs of one packet: (port number or 'NORMAL'/'CONTROLLER'/..., packet as sent).
        An empty list means dropped (no flow, or a flow without output). ``ct(table=N)`` goes on
        in table N with the tracked packet (actions after it are not simulated)."""
        entry = self.lookup(dict(pkt), in_port, table_id)
        if entry is None:
            return []
        if self._meter_of(entry) in self.exhausted:
            return []
        entry.packet_count += 1
        entry.byte_count += size
        current: Packet = dict(pkt)
        out: list[tuple[int | str, Packet]] = []
        for inst in entry.instructions:
            for action in groupsim.expand(getattr(inst, "actions", ()) or (), self.groups, self.down_ports):
                if isinstance(action, parser.OFPActionSetField):
                    current[action.key] = canonical(action.key, action.value)
                elif isinstance(action, parser.NXActionCT):
                    current = self.conntrack.execute(current, action)
                    if action.recirc_table != NX_CT_RECIRC_NONE:
                        return out + self.process(current, in_port, size, action.recirc_table)
                elif isinstance(action, parser.OFPActionOutput):
                    sent = {k: v for k, v in current.items() if k not in METADATA}
                    if action.port == ofp.OFPP_IN_PORT:
                        out.append((in_port, sent))
                    elif action.port == in_port:
                        continue  # OpenFlow never sends a packet back out its ingress port
                    else:
                        out.append((SPECIAL_PORTS.get(action.port, action.port), sent))
        return out


def __getattr__(name: str) -> Any:
    """``flowsim.Network`` / ``flowsim.Outcome`` live in ``netsim`` (the topology walker)."""
    if name in ("Network", "Outcome", "ForwardingLoop"):
        from tests.support import netsim

        return getattr(netsim, name)
    raise AttributeError(name)
