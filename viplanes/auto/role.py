"""Automatic lanes in the split deployment: the master controller runs them.

One writer of lane state (docs/architecture.md): in ``viplanes serve`` that is the one process; in
the split deployment the lane scheduler runs on the controller node holding the lease, and so do
the acceptor, the idle ender (it reads each lane's counters from the switches, which only a
controller can), the firefly listener and sFlow detection. ``AutomationRole`` is built once at
start (bad ``VIPLANES_FIREFLY_*`` / ``VIPLANES_SFLOW_*`` settings stop the process with one line),
then started when the node becomes master and stopped when it stops being master. A standby
binds no UDP port; fireflies and sFlow go to the master's address (or an address that follows
the lease).

Transitions run in order on one worker thread, so the lease callbacks never wait for sockets to
close or goflow2 to exit, and a quick stop-then-start cannot bind a port the old listener still holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from viplanes.auto.service import Automation, AutoSettings
from viplanes.auto.sflowwire import sflow_detection
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.lanes.desk import LaneDesk
from viplanes.topologies.model import Topology

log = logging.getLogger(__name__)


class AutomationRole:
    """``start``/``stop`` as the lease comes and goes; ``running`` while master."""

    def __init__(
        self,
        manager: LaneDesk,
        topology: Topology,
        clock: Callable[[], float],
        auto: AutoSettings,
        sflow: SflowSettings,
    ) -> None:
        if sflow.enabled and not sflow.goflow2.exists():
            raise OSError(f"sflow: collector {sflow.goflow2} not found (scripts/setup.sh builds it)")
        self.manager, self.topology, self.clock = manager, topology, clock
        self.auto, self.sflow = auto, sflow
        self.automation: Automation | None = None
        self.detection: SflowDetection | None = None
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="viplanes-auto-role")

    @property
    def running(self) -> bool:
        return self.automation is not None

    def start(self) -> Future[None]:
        return self._worker.submit(self._start)

    def stop(self) -> Future[None]:
        return self._worker.submit(self._stop)

    def close(self) -> None:
        """Stop (if running) and end the worker: the process is ending."""
        self.stop().result(timeout=30)
        self._worker.shutdown(wait=True)

    def _start(self) -> None:
        if self.automation is not None:
            return
        try:
            automation = Automation(self.manager, self.auto, self.clock)
        except OSError as exc:
            log.error("automatic lanes not started: firefly listener: %s", exc)
            return
        automation.start()
        detection: SflowDetection | None = None
        try:
            detection = sflow_detection(automation.acceptor, self.topology, self.clock, self.sflow)
            if detection is not None:
                detection.start()
        except OSError as exc:  # the gate's port taken, goflow2 gone: lanes by firefly still work
            log.error("sflow detection not started: %s", exc)
            if detection is not None:
                detection.stop()
            detection = None
        self.automation, self.detection = automation, detection
        log.info(
            "automatic lanes running (master): firefly %s, sflow %s",
            self.auto.firefly_port or "off",
            "on" if detection is not None else "off",
        )

    def _stop(self) -> None:
        if self.detection is not None:
            self.detection.stop()
        if self.automation is not None:
            self.automation.stop()
            log.info("automatic lanes stopped (no longer master)")
        self.automation, self.detection = None, None
