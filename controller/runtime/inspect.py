"""Read-only facts about the live switches for the operator console: what is connected, what the
last reconcile changed, a lane's flows as the switch reports them, and drift (where the switches
differ from the database). Uses only LaneRuntime's public surface (``connected``, ``reconciled``,
``desired()``, ``flow_stats()``, ``reconcile_switch()``); changes nothing except through
``reconcile_now``, which is the controller's own reconcile.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from viplanes.controller.compile import reconcile
from viplanes.controller.compile.cookies import ALL_APP_FLOWS, EXACT_MASK, lane_cookie, lane_id_from_cookie
from viplanes.domain.inspection import DriftReport, FlowFact, SwitchRow

STATS_TIMEOUT_S = 2.0


def _field_text(name: str, value: Any) -> str:
    """IPv4 fields come from the wire decoder as ints (or (value, mask) pairs): show them dotted."""
    if isinstance(value, tuple) and len(value) == 2:
        return "/".join(_field_text(name, v) for v in value)
    if isinstance(value, int) and (name.startswith("ipv4_") or name.startswith("arp_") and name[-2:] in ("pa",)):
        return str(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    return str(value)


def _match_text(match: Any) -> str:
    items = match.items() if isinstance(match, dict) else getattr(match, "_fields2", None) or []
    return ", ".join(f"{k}={_field_text(k, v)}" for k, v in items) or "any"


class ControllerInspector:
    """Wraps a LaneRuntime (the embedded controller) for the console: its ``switch_view``,
    a :class:`viplanes.domain.inspection.SwitchView`."""

    def __init__(self, runtime: Any, openflow_role: Callable[[], str]) -> None:
        self.runtime = runtime
        self.openflow_role = openflow_role  # the runtime's (EQUAL) or a cluster node's roles'

    def _name(self, dpid: int) -> tuple[str, str]:
        topo = self.runtime.topology
        sw = topo.switch_by_dpid(dpid) if topo is not None else None
        return (sw.name, sw.role) if sw else (f"dpid {dpid}", "unknown")

    def _dpids(self) -> list[int]:
        topo = self.runtime.topology
        known = {sw.dpid for sw in topo.switches} if topo is not None else set()
        return sorted(known | set(self.runtime.connected))

    def switches(self) -> list[SwitchRow]:
        out = []
        for dpid in self._dpids():
            name, role = self._name(dpid)
            up = dpid in self.runtime.connected
            flows = self.runtime.flow_stats(dpid, *ALL_APP_FLOWS, STATS_TIMEOUT_S) if up else None
            plan = self.runtime.reconciled.get(dpid)
            last = (
                "never"
                if plan is None
                else f"kept {plan.kept}, added {len(plan.adds)}, deleted {len(plan.deletes)}, "
                f"refreshed {len(plan.refreshes)}, meters {len(plan.meters)}"
            )
            of_role = self.openflow_role() if up else "—"
            out.append(SwitchRow(dpid, name, role, of_role, up, None if flows is None else len(flows), last))
        return out

    def lane_flows(self, lane_id: int) -> dict[str, list[FlowFact] | None]:
        """Switch name -> the lane's flows there (None: switch not connected or no answer)."""
        out: dict[str, list[FlowFact] | None] = {}
        for dpid in self._dpids():
            name = self._name(dpid)[0]
            if dpid not in self.runtime.connected:
                out[name] = None
                continue
            stats = self.runtime.flow_stats(dpid, lane_cookie(lane_id), EXACT_MASK, STATS_TIMEOUT_S)
            out[name] = (
                None
                if stats is None
                else [
                    FlowFact(
                        e.priority, _match_text(e.match), e.packet_count, e.byte_count, e.hard_timeout, e.duration_sec
                    )
                    for e in stats
                ]
            )
        return out

    def drift(self) -> DriftReport:
        """Compare every connected switch with the database, the way reconcile would (no change)."""
        report = DriftReport()
        now = self.runtime.clock()  # the runtime's lane clock, as reconcile reads it
        self.runtime.forget_lane_read()  # read the database now, once for every switch
        for dpid in sorted(self.runtime.connected):
            name = self._name(dpid)[0]
            try:
                per_dpid, lanes = self.runtime.desired(now, dpid)
            except Exception as exc:
                report.unreadable.append(f"{name}: desired lanes unreadable ({exc})")
                continue
            actual = self.runtime.flow_stats(dpid, *ALL_APP_FLOWS, STATS_TIMEOUT_S)
            if actual is None:
                report.unreadable.append(f"{name}: no flow stats")
                continue
            plan = reconcile.plan_switch(per_dpid.get(dpid, []), actual, now)
            _tally(report, name, plan.adds, "missing", lanes)
            _tally(report, name, plan.deletes, "unexpected", lanes)
        return report

    def reconcile_now(self) -> list[str]:
        """Run the controller's reconcile on every connected switch; one line per switch."""
        lines = []
        self.runtime.forget_lane_read()
        for dpid in sorted(self.runtime.connected):
            plan = self.runtime.reconcile_switch(dpid)
            name = self._name(dpid)[0]
            lines.append(
                f"{name}: skipped (see the server log)"
                if plan is None
                else f"{name}: added {len(plan.adds)}, deleted {len(plan.deletes)}, refreshed {len(plan.refreshes)}"
            )
        return lines


def _tally(report: DriftReport, switch: str, msgs: Any, what: str, live: dict[int, Any]) -> None:
    counts: dict[int | None, int] = {}
    for msg in msgs:
        lid = lane_id_from_cookie(msg.cookie)
        counts[lid] = counts.get(lid, 0) + 1
    for lid, n in sorted(counts.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        text = f"{switch}: {n} flow(s) {what}"
        if lid is None:
            report.base.append(f"{text} (base flows)")
        elif lid in live:
            report.lanes.setdefault(lid, []).append(text)
        else:
            report.orphans.append(f"{text} of lane {lid}, which is not live")
