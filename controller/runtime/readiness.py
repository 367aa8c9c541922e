"""Readiness of the switches: connected and reconciled, per switch and per lane.

``/readyz`` reports ``readiness()``, the lane manager refuses an immediate lane with 503 while
``unready(lane)`` names a switch, and the scheduler starts a due lane only when it is empty. A
switch is reconciled once its reconcile after the latest connect finished; a disconnect clears
that (``LaneRuntime.switch_down``). Reads ``SwitchState`` only, without locks.
"""

from __future__ import annotations

from typing import Any

from viplanes.controller.compile import lane as compiler
from viplanes.controller.runtime.switches import SwitchState
from viplanes.domain.values import LaneSpec


class SwitchReadiness:
    """Which switches are connected and reconciled (for /readyz and the API's 503 gate)."""

    def __init__(self, state: SwitchState) -> None:
        self.state = state

    def switch_ready(self, dpid: int) -> bool:
        return dpid in self.state.connected and dpid in self.state.reconciled

    def unready(self, lane: LaneSpec) -> list[str]:
        topology = self.state.topology
        if topology is None:
            return []
        try:
            dpids = compiler.path_dpids(lane, topology)
        except ValueError:
            return []  # activation fails it with the reason
        return [self.state.switch_name(d) for d in dpids if not self.switch_ready(d)]

    def readiness(self) -> dict[str, Any]:
        topology = self.state.topology
        switches = [
            {
                "name": sw.name,
                "dpid": sw.dpid,
                "connected": sw.dpid in self.state.connected,
                "reconciled": self.switch_ready(sw.dpid),
            }
            for sw in (topology.switches if topology else ())
        ]
        return {"ready": all(sw["reconciled"] for sw in switches), "switches": switches}
