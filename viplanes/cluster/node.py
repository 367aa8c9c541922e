"""The split deployment's controller node: the process behind ``viplanes controller cluster``.

One process per controller machine, two or more per campus, each connected to every switch. The
one holding the lease (``viplanes.cluster.leader``) is OpenFlow MASTER (``controller/openflow/roles.py``) and
alone runs the lane scheduler, recovery, DNS-name refresh and the hand-off sweep; the others are SLAVE and wait.
The API runs elsewhere (``viplanes api``) and reaches this process only through the database.

Hand-off (``viplanes.cluster.handoff``): an API process commits a lane ``installing`` and NOTIFYs; the
master's hand-off round takes every lane waiting at that moment (``recover``: one batch, one
barrier per switch, one transaction for all outcomes) and NOTIFYs the API processes in that
transaction. An ended lane (released, revoked) is NOTIFYed too; its flows go in the same round
(every ended lane of the round in one batch). ``sweep`` (at most once a second) catches what a
lost notification missed and re-sends a lane whose spec changed (an extension's new hard
timeout, a name's new addresses).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from viplanes.domain.values import is_decimal

log = logging.getLogger("viplanes.cluster.node")
SWEEP_EVERY_S = 1.0


class ControllerNode:
    """Lease -> roles -> scheduler: everything a controller process does, minus the listener."""

    def __init__(self, db: Any, plane: Any, manager: Any, tick_s: float = 0.5) -> None:
        from viplanes.cluster.handoff import Waker
        from viplanes.cluster.leader import LeaderLease
        from viplanes.cluster.reports import StatusReporter

        self.db, self.plane, self.manager, self.tick_s = db, plane, manager, tick_s
        self.scheduler: Any = None
        self.names: Any = None
        self._swept_at = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.waker = Waker(db)
        # lane id -> when its outcome was NOTIFYed, oldest first (the hand-off and the scheduler
        # thread both record); pruned from the front, not walked whole at every round (it held
        # ~1,200 lanes at 125 activations/s)
        self._recent: dict[int, float] = {}
        self._recent_lock = threading.Lock()
        manager.committed_hook = self._committed
        if not db.is_sqlite:  # a round's outcomes, audit and done-NOTIFY in one statement
            from viplanes.cluster.handoff import DONE_CHANNEL

            manager.done_channel = DONE_CHANNEL
            manager.announced_hook = self._announced
        self.lease = LeaderLease(db, on_change=self._on_lease)
        plane.on_deposed = self._deposed
        plane.gate_writes(lambda: self.lease.is_leader)  # no flow-mod past the lease's own deadline
        self.reporter = StatusReporter(db, plane, self.lease.holder)  # switch readiness, lane counters

    def _on_lease(self, master: bool, epoch: int) -> None:
        self.plane.set_role(master, epoch)
        self._leading(master and self.plane.is_master)

    def _deposed(self, epoch: int) -> None:
        """A switch refused our generation: stop leading; if the lease is still ours, its next
        round takes a new epoch and claims the switches again (``LeaderLease.reclaim``)."""
        self._leading(False)
        self.lease.reclaim()

    def _leading(self, master: bool) -> None:
        from viplanes.lanes.names import NameWatcher
        from viplanes.lanes.scheduler import Scheduler

        with self._lock:
            if master and self.scheduler is None:
                self.scheduler = Scheduler(self.manager, interval_s=self.tick_s)
                self.names = NameWatcher(self.manager)  # lanes to a DNS name: re-resolved by the master
                self.scheduler.start()
                self.names.start()
            elif not master and self.scheduler is not None:
                self.scheduler.stop(timeout_s=0.1)  # never blocks the os-ken thread long
                self.names.stop(timeout_s=0.1)
                self.scheduler = None

    def sweep(self) -> None:
        """Remove flows of lanes that ended elsewhere; re-send lanes whose spec changed."""
        if not self.plane.is_master:
            return
        carried = dict(self.plane.lanes)  # before the read: a lane activated after it stays
        desired = {spec.lane_id: spec for spec in self.manager.desired_lanes()}
        self.remove_ended({lane_id for lane_id in carried if lane_id not in desired})
        for lane_id, spec in desired.items():
            old = carried.get(lane_id)
            if old is not None and old != spec:
                result = self.plane.activate(spec)
                if not result.ok:
                    log.warning("lane %d: re-send failed (%s)", lane_id, result.reason)

    def _committed(self, s: Any, states: dict[int, str], activated_at: float | None = None) -> None:
        """The lane manager recorded outcomes: the API processes hear it at the commit."""
        from viplanes.cluster.handoff import notify_done

        notify_done(s, states, activated_at)
        self._announced(states)

    def _announced(self, states: dict[int, str]) -> None:
        """The API processes were told these lanes' outcomes (``_answer_unheard`` skips them).
        Re-inserted, so ``_recent`` stays in the order of announcement (oldest first)."""
        now = time.monotonic()
        with self._recent_lock:
            for lane_id in states:
                self._recent.pop(lane_id, None)
                self._recent[lane_id] = now

    def _answer_unheard(self, lane_ids: set[int]) -> None:
        """Lanes an API process woke us for that no round recorded (an extension's re-send of an
        active lane, a lane already ended): tell their waiters to read the row now."""
        now = time.monotonic()
        with self._recent_lock:  # drop the expired from the front: the rest is younger
            while self._recent:
                oldest = next(iter(self._recent))
                if now - self._recent[oldest] <= 10.0:
                    break
                del self._recent[oldest]
            unheard = {lane_id: "check" for lane_id in lane_ids if lane_id not in self._recent}
        if unheard:
            from viplanes.cluster.handoff import notify_done

            with self.db.write() as s:
                notify_done(s, unheard)

    def remove_ended(self, lane_ids: set[int]) -> None:
        """Flows of lanes whose end an API process committed and NOTIFYed (never revived: an
        ended state is terminal), all in one batch."""
        carried = [lane_id for lane_id in sorted(lane_ids) if lane_id in self.plane.lanes]
        failure = self.plane.deactivate_many(carried)  # and any queued removal left over
        if failure:
            log.warning("removal of %d lanes not confirmed (%s)", len(carried), failure)

    def handoff_round(self, woken: list[str]) -> None:
        """One round of the master: activate every waiting lane, remove every ended one."""
        wanted = {int(p[5:]) for p in woken if p.startswith("lane:") and is_decimal(p[5:])}
        ended = {int(p[6:]) for p in woken if p.startswith("ended:") and is_decimal(p[6:])}
        carried = [lane_id for lane_id in sorted(ended) if lane_id in self.plane.lanes]
        if carried:  # sent with this round's activations: one barrier per switch for both
            self.plane.queue_removals(carried)
        if wanted:
            self.manager.recover()
            self._answer_unheard(wanted)
        if carried:
            self.remove_ended(set())  # whatever no activation took along
        if time.monotonic() - self._swept_at >= SWEEP_EVERY_S:
            self._swept_at = time.monotonic()
            self.sweep()

    def _handoff_loop(self) -> None:
        self._swept_at = 0.0
        while not self._stop.is_set():
            woken = self.waker.wait(SWEEP_EVERY_S)
            if self._stop.is_set() or not self.plane.is_master:
                continue
            try:
                self.handoff_round(woken)
            except Exception:
                log.exception("hand-off round")

    def start(self) -> None:
        self.plane.start()
        self.lease.start()
        self.reporter.start()
        threading.Thread(target=self._handoff_loop, name="viplanes-handoff", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        self.reporter.stop()
        self.lease.stop(release=True)
        self._leading(False)
        self.plane.stop()
        self.waker.close()
