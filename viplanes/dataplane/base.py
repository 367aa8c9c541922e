"""The one seam between the northbound side and the controller.

The API and the lane scheduler talk only to a :class:`Dataplane`. In the embedded default
(`viplanes serve`) it is the in-process os-ken controller; tests may pass their own. The database
stays the source of truth: the controller asks ``desired_lanes`` whenever it reconciles (controller
start, switch connect), so a restarted controller rebuilds everything from the store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from viplanes.domain.values import ActivationResult, LaneCounters, LaneSpec

DesiredLanes = Callable[[], list[LaneSpec]]

# Activation failures that say nothing about the lane itself, only that a switch is away or slow
# right now: the lane manager keeps such a lane ``installing`` and retries it while its window is
# open, instead of failing it for good. Anything else (no path, switch refused) fails the lane.
# "not master": a standby or deposed controller (controller/openflow/roles.py); the master installs it.
TRANSIENT_MARKERS = ("not connected", "disconnected", "did not confirm", "data plane busy", "not master")


def is_transient(reason: str) -> bool:
    return any(marker in reason for marker in TRANSIENT_MARKERS)


class Dataplane(Protocol):
    """``carries_lane_sets`` (optional class attribute, default False): True once the data plane
    compiles destination sets, port ranges and IPv6 (``LaneSpec.dst_nets``/``dst_ports``). Until then
    the lane manager refuses such lanes itself (422 ``lane_shape_unsupported``) and never sends
    them, so an old compiler never sees a lane it would silently narrow to one flow."""

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        """Tell the controller where to read the lanes that should be active (for reconcile)."""

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        """Install the lane on every switch of its path; return once all barriers answered."""

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        """Delete the lane's flows (by cookie) from every switch."""

    def counters(self, lane_id: int) -> LaneCounters | None:
        """Packets/bytes the lane carried so far, or None when the controller has no stats."""

    def unready(self, lane: LaneSpec) -> list[str]:
        """Switches the lane needs that are not connected and reconciled yet (names); [] = ready.
        The API answers 503 instead of creating a lane that could not be installed now."""

    def readiness(self) -> dict[str, Any]:
        """``{"ready": bool, "switches": [{name, dpid, connected, reconciled}, ...]}`` for /readyz."""
