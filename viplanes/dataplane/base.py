"""The one seam between the northbound side and the controller.

The API and the lane scheduler talk only to a :class:`Dataplane`. In the embedded default
(`viplanes serve`) it is the in-process os-ken controller; tests may pass their own. The database
stays the source of truth: the controller asks ``desired_lanes`` whenever it reconciles (controller
start, switch connect), so a restarted controller rebuilds everything from the store.

``Dataplane`` declares every member the service calls, so no caller asks an implementation what
it can do (no ``getattr``). What the lane service branches on is one value fixed at construction,
``capabilities`` (:class:`PlaneCapabilities`), not four flags; the seam takes no database
connection: a wake-up that rides in the service's transaction is the service's own statement
(``expect_wake`` only tells the plane one is coming). Each implementation (``memory``, ``remote``,
the controller's ``LaneRuntime``) writes out every member, a no-op where it has nothing to do:
no base class of defaults, so what a plane does is read in one class (``activate_each`` is the
one shared body: ``activate_many`` of a plane without batches).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from viplanes.domain.inspection import SwitchView
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec

DesiredLanes = Callable[[], list[LaneSpec]]

# Activation failures that say nothing about the lane itself, only that a switch is away or slow
# right now: the lane manager keeps such a lane ``installing`` and retries it while its window is
# open, instead of failing it for good. Anything else (no path, switch refused) fails the lane.
# "not master": a standby or deposed controller (controller/openflow/roles.py); the master installs it.
TRANSIENT_MARKERS = ("not connected", "disconnected", "did not confirm", "data plane busy", "not master")


def is_transient(reason: str) -> bool:
    return any(marker in reason for marker in TRANSIENT_MARKERS)


@dataclass(frozen=True)
class PlaneCapabilities:
    """How a data plane carries lanes, fixed when it is built; the lane service reads it, never
    an implementation's class."""

    # True: ``activate_many`` sends a whole round with one barrier per switch, so the lane service
    # hands it every due lane at once and records the outcomes in one transaction; False: the
    # service activates due lanes one by one.
    batches: bool = False
    # True: ``begin_deactivate`` sends a lane's deletes before its end is committed (the
    # in-process controller), so a release fails closed and its answer waits for the barriers.
    removes_early: bool = False
    # True: an ok ``activate`` means the plane already committed the lane active (the split
    # deployment's controller did); the service writes nothing and reads the row back.
    records_outcome: bool = False
    # The channel a data plane in another process listens on (PostgreSQL NOTIFY), or None. With
    # one, the lane service NOTIFYs it inside the transaction that commits a lane or its end.
    wake_channel: str | None = None


class Dataplane(Protocol):
    """Everything the lane service, the API and the entry points ask of a data plane."""

    capabilities: PlaneCapabilities

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        """Tell the controller where to read the lanes that should be active (for reconcile)."""

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        """Install the lane on every switch of its path; return once all barriers answered."""

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        """Install several lanes; each keeps its own result (lane id -> result)."""

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        """Delete the lane's flows (by cookie) from every switch."""

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None] | None:
        """Send the lane's deletes now; the function that waits for them (call it exactly once),
        or None when nothing was sent (the service then calls ``deactivate`` after the commit)."""

    def expect_wake(self, payload: str) -> None:
        """The lane service is about to NOTIFY ``capabilities.wake_channel`` with ``payload``
        (``lane:<id>`` or ``ended:<id>``) inside the transaction that commits it: register what
        waits for the answer before the commit can bring it."""

    def counters(self, lane_id: int) -> LaneCounters | None:
        """Packets/bytes the lane carried so far, or None when the controller has no stats."""

    def watch_counts(self, watches: list[FlowWatch], seconds: float) -> list[int] | None:
        """Packets each watch counted over about ``seconds`` (count-only flows installed and
        removed again over OpenFlow), or None when this plane cannot watch (then no running NAT'd
        connection is taken over: docs/automatic-lanes.md)."""

    def unready(self, lane: LaneSpec) -> list[str]:
        """Switches the lane needs that are not connected and reconciled yet (names); [] = ready.
        The API answers 503 instead of creating a lane that could not be installed now."""

    def readiness(self) -> dict[str, Any]:
        """``{"ready": bool, "switches": [{name, dpid, connected, reconciled}, ...]}`` for /readyz."""

    def when_ready(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (on any thread; it must return at once) whenever a switch becomes ready
        (reconciled after it connected), so the lanes waiting for it are activated then, not at
        the next recovery round. One listener: a later call replaces it."""

    def interrupted(self) -> dict[int, str]:
        """Carried lanes with no usable path left (held at their first switch), and why, naming
        the links: the lane service marks them ``interrupted`` (docs/dataplane.md, "Link failures")."""

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        """Re-routes done so far, and the seconds each of the latest took (report to switches
        confirmed), for /metrics."""

    def switch_facts(self) -> dict[str, SwitchFacts]:
        """Switch name -> what the controller learned from it (table and meter features, the
        entries it held when it refused one for a full table); {} when this plane has no switches."""

    def openflow_transport(self) -> str | None:
        """How switches reach this process's OpenFlow listener, for /healthz: ``"tls"``,
        ``"insecure-tcp"``, or None when this process has no listener."""

    def switch_view(self) -> SwitchView | None:
        """The console's read-only view of the live switches, or None when this plane has no
        switches of its own (the console then shows no switch pages' live columns)."""

    def start(self) -> None:
        """Begin serving switches (the embedded controller opens its listener); ``serve`` calls it."""

    def stop(self) -> None:
        """Stop serving switches; ``serve`` calls it on the way out."""


def activate_each(plane: Dataplane, lanes: list[LaneSpec], timeout_s: float) -> dict[int, ActivationResult]:
    """``activate_many`` of a plane with no round of its own: one lane after the other."""
    return {lane.lane_id: plane.activate(lane, timeout_s) for lane in lanes}
