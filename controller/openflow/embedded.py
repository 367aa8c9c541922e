"""``EmbeddedController``: a LaneRuntime plus os-ken's apps listening in this process.

This is the data plane behind ``viplanes serve`` (and ``viplanes controller run``). The database
stays the source of truth: ``attach_source`` before ``start`` and every switch that connects is
reconciled against it; a periodic round (``refresh_period_s``) refreshes hard timeouts of long
lanes (see ``reconcile``) and a drift check every ``drift_period_s`` counts each switch's app
flows and reconciles a switch whose count is off (``drift``), so flows deleted behind our back
come back within seconds. One per process: os-ken's app manager is a singleton.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from viplanes.controller.openflow.admission import ListenerSecurity
from viplanes.controller.openflow.handshakes import HandshakeGauge
from viplanes.controller.openflow.peerauth import SwitchTrust
from viplanes.controller.runtime.drift import DRIFT_PERIOD_S
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.links import LinkSettings
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
REFRESH_PERIOD_S = 300.0
# How long ``start`` lets the warm-up compile alone before the listener opens. After a restart
# every switch reconnects at once; a warm-up that shares the GIL with 140 handshakes and
# reconciles took 3-4.5 s for 1,000 lanes (0.3-0.9 s alone), and the switches crossed by every
# lane (the border) waited for all of it. Bounded: 10,000 lanes go on compiling in the background.
WARM_UP_ALONE_S = 2.0


class EmbeddedController(LaneRuntime):
    """The os-ken controller in this process: ``start()`` returns once it listens."""

    def __init__(
        self,
        topology: Topology | None,
        host: str = "127.0.0.1",
        port: int = 6653,
        *,
        security: ListenerSecurity | None = None,
        clock: Callable[[], float] | None = None,
        refresh_period_s: float = REFRESH_PERIOD_S,
        drift_period_s: float = DRIFT_PERIOD_S,
        learn_features: bool = False,
        links: LinkSettings | None = None,
    ) -> None:
        # learn_features: ask TABLE_FEATURES and METER_FEATURES at connect. Off by default: OVS
        # answers for 254 tables, and parsing that at connect made a lane request in the same
        # seconds meet switches_not_ready (test_attack_switches' impostor test, 4 of 5 runs)
        super().__init__(topology, clock=clock, ask_features=learn_features, links=links)
        self.host, self.port = host, port
        # None: plain TCP, every dpid of the topology admitted (unit tests, --insecure-tcp)
        self.security = security or ListenerSecurity(tls=None, trust=SwitchTrust(topology))
        self.refresh_period_s = refresh_period_s
        self.drift_period_s = drift_period_s
        self._running: Any = None
        self._stop = threading.Event()
        self.handshakes = HandshakeGauge()  # the listener counts, reconciles wait (``Resync``)

    def openflow_transport(self) -> str | None:
        """``insecure-tcp`` when switches are neither authenticated nor encrypted, for /healthz."""
        return "insecure-tcp" if self.security.tls is None else "tls"

    def start(self) -> None:
        from viplanes.controller.openflow.launcher import start_apps

        if self._running is not None:
            return
        if self.topology is not None:
            warm = threading.Thread(target=self.warm_up, name="viplanes-warm-up", daemon=True)
            warm.start()
            warm.join(WARM_UP_ALONE_S)
        try:
            self._running = start_apps(
                ["viplanes.controller.openflow.app"],
                self.host,
                self.port,
                lane_runtime=self,
                of_security=self.security,
                of_handshakes=self.handshakes,
            )
        except OSError as exc:
            raise RuntimeError(f"OpenFlow listener {self.host}:{self.port}: {exc.strerror or exc}") from None
        self._stop.clear()
        threading.Thread(
            target=self._every, args=(self.refresh_period_s, self.reconcile_all), name="viplanes-refresh", daemon=True
        ).start()
        if self.probes is not None:
            threading.Thread(
                target=self._every,
                args=(self.probes.interval_s, self.probes.round),
                name="viplanes-probes",
                daemon=True,
            ).start()
        if self.drift_period_s > 0:
            threading.Thread(
                target=self._every, args=(self.drift_period_s, self.check_drift), name="viplanes-drift", daemon=True
            ).start()

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
        for dpid in sorted(self.connected):
            self.switch_down(dpid)
