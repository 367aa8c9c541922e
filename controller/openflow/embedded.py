"""``EmbeddedController``: os-ken's apps listening in this process, around a LaneRuntime it holds.

This is the data plane behind ``viplanes serve`` (and ``viplanes controller run``). The database
stays the source of truth: ``attach_source`` before ``start`` and every switch that connects is
reconciled against it; a periodic round (``refresh_period_s``) refreshes hard timeouts of long
lanes (see ``reconcile``) and a drift check every ``drift_period_s`` counts each switch's app
flows and reconciles a switch whose count is off (``drift``), so flows deleted behind our back
come back within seconds. One per process: os-ken's app manager is a singleton.

It is the :class:`~viplanes.dataplane.base.Dataplane` of ``serve`` and of a cluster's node: the
seam's calls go to the runtime (``runtime``), the listener's (``start``, ``stop``,
``openflow_transport``) are its own. The switches' events and the periodic rounds go to
``events`` (``events.py:SwitchEvents``): the runtime itself, or a cluster node's role-aware
``roles.RoleController`` holding the same runtime.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from viplanes.controller.openflow.admission import ListenerSecurity
from viplanes.controller.openflow.events import SwitchEvents
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.openflow.peerauth import SwitchTrust
from viplanes.controller.runtime.drift import DRIFT_PERIOD_S
from viplanes.controller.runtime.inspect import ControllerInspector
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.links import LinkSettings
from viplanes.dataplane.base import DesiredLanes
from viplanes.domain.inspection import SwitchView
from viplanes.domain.switchfacts import SwitchFacts
from viplanes.domain.values import ActivationResult, FlowWatch, LaneCounters, LaneSpec
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
REFRESH_PERIOD_S = 300.0
# How long ``start`` lets the warm-up compile alone before the listener opens. After a restart
# every switch reconnects at once; a warm-up that shares the GIL with 140 handshakes and
# reconciles took 3-4.5 s for 1,000 lanes (0.3-0.9 s alone), and the switches crossed by every
# lane (the border) waited for all of it. Bounded: 10,000 lanes go on compiling in the background.
WARM_UP_ALONE_S = 2.0
# How long ``stop`` waits for a periodic round (refresh, probes, drift) already under way; the
# switches are down by then, so a round's waits end at once.
PERIODIC_JOIN_S = 5.0


def embedded_runtime(
    topology: Topology | None,
    *,
    clock: Callable[[], float] | None = None,
    learn_features: bool = False,
    links: LinkSettings | None = None,
) -> LaneRuntime:
    """The runtime an embedded controller holds. ``learn_features``: ask TABLE_FEATURES and
    METER_FEATURES at connect. Off by default: OVS answers for 254 tables, and parsing that at
    connect made a lane request in the same seconds meet switches_not_ready (test_attack_switches'
    impostor test, 4 of 5 runs)."""
    return LaneRuntime(topology, clock=clock, ask_features=learn_features, links=links)


class EmbeddedController:
    """The os-ken controller in this process: ``start()`` returns once it listens."""

    def __init__(
        self,
        runtime: LaneRuntime,
        host: str = "127.0.0.1",
        port: int = 6653,
        *,
        events: SwitchEvents | None = None,
        security: ListenerSecurity | None = None,
        refresh_period_s: float = REFRESH_PERIOD_S,
        drift_period_s: float = DRIFT_PERIOD_S,
    ) -> None:
        self.runtime = runtime
        self.events: SwitchEvents = events if events is not None else runtime
        self.host, self.port = host, port
        # None: plain TCP, every dpid of the topology admitted (unit tests, --insecure-tcp)
        self.security = security or ListenerSecurity(tls=None, trust=SwitchTrust(runtime.topology))
        self.refresh_period_s = refresh_period_s
        self.drift_period_s = drift_period_s
        self._running: Any = None
        self._stop = threading.Event()
        self._periodic: list[threading.Thread] = []  # joined by stop(): none outlives it
        self.handshakes = HandshakeGauge()  # the listener counts, reconciles wait (``Resync``)
        runtime.handshakes = self.handshakes

    # ---- the Dataplane seam: the runtime's ----------------------------------------------------
    capabilities = LaneRuntime.capabilities

    def attach_source(self, desired_lanes: DesiredLanes) -> None:
        self.runtime.attach_source(desired_lanes)

    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        return self.runtime.activate(lane, timeout_s)

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        return self.runtime.activate_many(lanes, timeout_s)

    def deactivate(self, lane_id: int, timeout_s: float = 5.0) -> None:
        self.runtime.deactivate(lane_id, timeout_s)

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None]:
        return self.runtime.begin_deactivate(lane_id, timeout_s)

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None:
        return self.runtime.deactivate_many(lane_ids, timeout_s)

    def queue_removals(self, lane_ids: Iterable[int]) -> None:
        self.runtime.queue_removals(lane_ids)

    def expect_wake(self, payload: str) -> None:
        self.runtime.expect_wake(payload)

    def counters(self, lane_id: int, timeout_s: float = 2.0) -> LaneCounters | None:
        return self.runtime.counters(lane_id, timeout_s)

    def watch_counts(self, watches: list[FlowWatch], seconds: float) -> list[int] | None:
        return self.runtime.watch_counts(watches, seconds)

    def unready(self, lane: LaneSpec) -> list[str]:
        return self.runtime.unready(lane)

    def readiness(self) -> dict[str, Any]:
        return self.runtime.readiness()

    def when_ready(self, wake: Callable[[], None]) -> None:
        self.runtime.when_ready(wake)

    def interrupted(self) -> dict[int, str]:
        return self.runtime.interrupted()

    def reroutes(self) -> tuple[int, tuple[float, ...]]:
        return self.runtime.reroutes()

    def switch_facts(self) -> dict[str, SwitchFacts]:
        return self.runtime.switch_facts()

    def switch_view(self) -> SwitchView:
        """The console's view of these switches, with the role ``events`` holds on them."""
        return ControllerInspector(self.runtime, self.events.openflow_role)

    # ---- what a cluster's node reads beside the seam (``cluster/node.py:ClusterPlane``) ---------
    @property
    def lanes(self) -> Mapping[int, LaneSpec]:
        return self.runtime.lanes

    @property
    def is_master(self) -> bool:
        return self.runtime.is_master

    def gate_writes(self, lease_valid: Callable[[], bool]) -> None:
        self.runtime.gate_writes(lease_valid)

    # ---- the listener ---------------------------------------------------------------------------
    def openflow_transport(self) -> str | None:
        """``insecure-tcp`` when switches are neither authenticated nor encrypted, for /healthz."""
        return "insecure-tcp" if self.security.tls is None else "tls"

    def start(self) -> None:
        from viplanes.controller.openflow.launcher import start_apps

        if self._running is not None:
            return
        runtime = self.runtime
        if runtime.topology is not None:
            warm = threading.Thread(target=runtime.warm_up, name="viplanes-warm-up", daemon=True)
            warm.start()
            warm.join(WARM_UP_ALONE_S)
        try:
            self._running = start_apps(
                ["viplanes.controller.openflow.app"],
                self.host,
                self.port,
                switch_events=self.events,
                of_refusals=runtime.refusals,
                of_security=self.security,
                of_handshakes=self.handshakes,
            )
        except OSError as exc:
            raise RuntimeError(f"OpenFlow listener {self.host}:{self.port}: {exc.strerror or exc}") from None
        self._stop.clear()
        jobs: list[tuple[str, float, Callable[[], Any]]] = [
            ("viplanes-refresh", self.refresh_period_s, self.events.reconcile_all)
        ]
        if runtime.probes is not None:
            jobs.append(("viplanes-probes", runtime.probes.interval_s, runtime.probes.round))
        if self.drift_period_s > 0:
            jobs.append(("viplanes-drift", self.drift_period_s, self.events.check_drift))
        self._periodic = [
            threading.Thread(target=self._every, args=(period, work), name=name, daemon=True)
            for name, period, work in jobs
        ]
        for t in self._periodic:
            t.start()

    def _every(self, period_s: float, work: Callable[[], Any]) -> None:
        while not self._stop.wait(period_s):
            try:
                work()
            except Exception:
                LOG.exception("periodic %s failed", work.__name__)

    def stop(self) -> None:
        self._stop.set()
        if self._running is not None:
            self._running.stop()
            self._running = None
        # the apps are gone, so no switch's disconnect event will come: end every wait on a
        # switch now. A reconcile still waiting for a reply otherwise ran out its 10 s timeout
        # after stop(), holding the cyclic GC off (``heap.gc_held``) all that time.
        for dpid in sorted(self.runtime.connected):
            self.events.switch_down(dpid)
        self.runtime.stop()  # its re-route worker
        for t in self._periodic:  # woken by ``_stop``; one still at work ends with its round
            t.join(PERIODIC_JOIN_S)
        self._periodic = []
