"""Readiness of the switches: connected and reconciled, per switch and per lane.

A mixin of :class:`~viplanes.controller.runtime.lane_runtime.LaneRuntime` (kept apart so the runtime stays one
room): ``/readyz`` reports ``readiness()``, the lane manager refuses an immediate lane with 503
while ``unready(lane)`` names a switch, and the scheduler starts a due lane only when it is empty.
A switch is reconciled once its reconcile after the latest connect finished; a disconnect
clears that (``LaneRuntime.switch_down``).
"""

from __future__ import annotations

import time
from typing import Any

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile import reconcile
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology


class SwitchReadiness:
    """Which switches are connected and reconciled (for /readyz and the API's 503 gate)."""

    topology: Topology | None
    connected: set[int]
    reconciled: dict[int, reconcile.Plan]

    def _wait_for_switches(self, lane: LaneSpec, timeout_s: float) -> None:
        """Give the switches of the lane's path up to ``timeout_s`` to (re)connect."""
        try:
            needed = set(compiler.lane_dpids(lane, self.topology))  # type: ignore[arg-type]
        except ValueError:
            return  # activate reports the compile error
        deadline = time.monotonic() + timeout_s
        while not needed <= self.connected and time.monotonic() < deadline:
            time.sleep(0.05)

    def _switch_ready(self, dpid: int) -> bool:
        return dpid in self.connected and dpid in self.reconciled

    def unready(self, lane: LaneSpec) -> list[str]:
        if self.topology is None:
            return []
        try:
            dpids = compiler.lane_dpids(lane, self.topology)
        except ValueError:
            return []  # activation fails it with the reason
        return [self.switch_name(d) for d in dpids if not self._switch_ready(d)]

    def readiness(self) -> dict[str, Any]:
        switches = [
            {
                "name": sw.name,
                "dpid": sw.dpid,
                "connected": sw.dpid in self.connected,
                "reconciled": self._switch_ready(sw.dpid),
            }
            for sw in (self.topology.switches if self.topology else ())
        ]
        return {"ready": all(sw["reconciled"] for sw in switches), "switches": switches}

    def switch_name(self, dpid: int) -> str:  # LaneRuntime's
        raise NotImplementedError
