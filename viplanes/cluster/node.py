"""The split deployment's controller node: the process behind ``viplanes controller cluster``.

One process per controller machine, two or more per campus, each connected to every switch. The
one holding the lease (``viplanes.cluster.leader``) is OpenFlow MASTER (``controller/openflow/roles.py``) and
alone runs the lane scheduler, recovery, DNS-name refresh and the hand-off sweep; the others are SLAVE and wait.
The API runs elsewhere (``viplanes api``) and reaches this process only through the database.

Hand-off (``viplanes.cluster.handoff``): an API process commits a lane ``installing`` and NOTIFYs; the
master's hand-off round takes every lane waiting at that moment (``recover``: one batch, one
barrier per switch, one transaction for all outcomes) and NOTIFYs the API processes in that
transaction. An ended lane (released, revoked) is NOTIFYed too; its flows go in the same round
(every ended lane of the round in one batch), once its committed row says it ended: a payload is
only a wake-up, anyone who can log in may send one (``viplanes.cluster.wakeups``). ``sweep`` (at
most once a second) re-derives the lanes to carry from the committed rows: it removes what they
no longer list, sends again every ``active`` lane the runtime does not carry (lost from memory by
whatever path) and re-sends a lane whose spec changed (an extension's new hard timeout, a
name's new addresses). A carried lane whose flows vanished from a switch is the drift check's
(``controller/runtime/drift.py``, every 2 s).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from viplanes.cluster.wakeups import missing_live, not_carried, payload_ids
from viplanes.dataplane.base import Dataplane
from viplanes.domain.values import LaneCounters, LaneSpec
from viplanes.lanes.activation import OutcomeHooks
from viplanes.store.db import Database

if TYPE_CHECKING:
    from viplanes.auto.role import AutomationRole
    from viplanes.lanes.manager import LaneManager
    from viplanes.lanes.names import NameWatcher
    from viplanes.lanes.scheduler import Scheduler

log = logging.getLogger("viplanes.cluster.node")
SWEEP_EVERY_S = 1.0
UNHEARD_MAX = 256  # "check" answers per round for wake-ups no round recorded


class ClusterPlane(Dataplane, Protocol):
    """The data plane of a controller node: the seam plus the carried lanes and the lease gate
    (``controller/openflow/embedded.py:EmbeddedController`` implements it)."""

    @property
    def is_master(self) -> bool:
        """MASTER on the switches and the lease still valid: the wire refuses flow-mods otherwise."""
        ...

    @property
    def lanes(self) -> Mapping[int, LaneSpec]:
        """The lanes this runtime carries now (lane id -> spec)."""
        ...

    def gate_writes(self, lease_valid: Callable[[], bool]) -> None: ...

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None: ...

    def queue_removals(self, lane_ids: Iterable[int]) -> None: ...


class NodeRoles(Protocol):
    """The OpenFlow role of a controller node on its switches (``controller/openflow/roles.py:
    RoleController``, the switches' events of the node's controller, implements it)."""

    is_master: bool  # MASTER on the switches: the wire refuses flow-mods while False
    epoch: int  # the OpenFlow generation (the lease epoch) it claimed the switches with
    on_deposed: Callable[[int], None] | None  # a switch refused our generation

    def set_role(self, master: bool, epoch: int) -> None: ...

    def readiness(self) -> dict[str, Any]: ...

    def all_lane_counters(self) -> dict[int, LaneCounters]: ...


class ControllerNode:
    """Lease -> roles -> scheduler: everything a controller process does, minus the listener."""

    def __init__(
        self,
        db: Database,
        plane: ClusterPlane,
        manager: LaneManager,
        tick_s: float = 0.5,
        automation: AutomationRole | None = None,
        *,
        roles: NodeRoles,
    ) -> None:
        """``automation``: started while master, stopped otherwise (``viplanes.auto.role``);
        ``roles``: what claims the switches for the lease's epoch (the plane's switches' events)."""
        from viplanes.cluster.handoff import Waker
        from viplanes.cluster.leader import LeaderLease
        from viplanes.cluster.reports import StatusReporter

        self.db, self.plane, self.manager, self.tick_s = db, plane, manager, tick_s
        self.roles = roles
        self.automation = automation
        self.scheduler: Scheduler | None = None
        self.names: NameWatcher | None = None
        self._swept_at = 0.0
        self._retry_at: dict[int, tuple[float, float]] = {}  # lost lane -> (next try, last wait)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.waker = Waker(db)
        # lane id -> when its outcome was NOTIFYed, oldest first (the hand-off and the scheduler
        # thread both record); pruned from the front, not walked whole at every round (it held
        # ~1,200 lanes at 125 activations/s)
        self._recent: dict[int, float] = {}
        self._recent_lock = threading.Lock()
        if db.is_sqlite:
            manager.announce_outcomes(OutcomeHooks(committed=self._committed))
        else:  # a round's outcomes, audit and done-NOTIFY in one statement
            from viplanes.cluster.handoff import DONE_CHANNEL

            manager.announce_outcomes(
                OutcomeHooks(committed=self._committed, done_channel=DONE_CHANNEL, announced=self._announced)
            )
        self.lease = LeaderLease(db, on_change=self._on_lease, liveness=True)  # a crashed master: taken at once
        roles.on_deposed = self._deposed
        plane.gate_writes(lambda: self.lease.is_leader)  # no flow-mod past the lease's own deadline
        self.reporter = StatusReporter(db, roles, self.lease.holder)  # switch readiness, lane counters

    def _on_lease(self, master: bool, epoch: int) -> None:
        self.roles.set_role(master, epoch)
        self._leading(master and self.roles.is_master)

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
                self.scheduler = Scheduler(self.manager, interval_s=self.tick_s, fence=self.lease.holds)
                self.names = NameWatcher(self.manager)  # lanes to a DNS name: re-resolved by the master
                self.scheduler.start()
                self.names.start()
                if self.automation is not None:
                    self.automation.start()  # returns at once: its own worker starts it
            elif not master and self.scheduler is not None:
                self.scheduler.stop(timeout_s=0.1)  # never blocks the os-ken thread long
                if self.names is not None:
                    self.names.stop(timeout_s=0.1)
                self.scheduler = None
                if self.automation is not None:
                    self.automation.stop()

    def sweep(self) -> None:
        """Make the carried lanes those the committed rows list: remove flows of lanes that
        ended elsewhere, send again the active lanes the runtime lost, re-send lanes whose spec
        changed."""
        if not self.plane.is_master:
            return
        carried = dict(self.plane.lanes)  # before the read: a lane activated after it stays
        desired = {spec.lane_id: spec for spec in self.manager.desired_lanes()}
        self.remove_ended({lane_id for lane_id in carried if lane_id not in desired})
        self.restore_lost(desired, carried)
        for lane_id, spec in desired.items():
            old = carried.get(lane_id)
            if old is not None and old != spec:
                result = self.plane.activate(spec)
                if not result.ok:
                    log.warning("lane %d: re-send failed (%s)", lane_id, result.reason)

    def restore_lost(self, desired: dict[int, LaneSpec], carried: dict[int, LaneSpec]) -> None:
        """Send again every lane the database holds ``active`` that the runtime does not carry
        (a removal it should not have made, a restart of its memory): back within one sweep.
        Lanes through a switch not reconciled yet are its reconcile's (a new master's)."""
        missing = [lane_id for lane_id in desired if lane_id not in carried]
        lost = missing_live(self.db, missing) if missing else set()
        now = time.monotonic()
        for lane_id in [i for i in self._retry_at if i not in lost]:
            del self._retry_at[lane_id]  # carried again, or ended
        specs = [
            desired[lane_id]
            for lane_id in sorted(lost)
            if lane_id not in self.plane.lanes
            and self._retry_at.get(lane_id, (0.0, 0.0))[0] <= now
            and not self.plane.unready(desired[lane_id])
        ]
        if not specs:
            return
        log.warning("%d active lanes were not carried (%s): sending them again", len(specs), [s.lane_id for s in specs])
        for lane_id, result in self.plane.activate_many(specs).items():
            if not result.ok:  # a switch refusing it: try again later, backing off to a minute
                wait = min(60.0, max(SWEEP_EVERY_S, 2 * self._retry_at.get(lane_id, (0.0, 0.0))[1]))
                self._retry_at[lane_id] = (now + wait, wait)
                log.warning("lane %d: sending again failed (%s); next try in %.0f s", lane_id, result.reason, wait)

    def _committed(self, s: Session | Connection, states: dict[int, str], activated_at: float | None = None) -> None:
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
        # a forged flood of "lane:<id>" must not make the master NOTIFY without bound: a waiter
        # left out reads its row after ``recheck_s`` anyway
        unheard = dict(sorted(unheard.items())[:UNHEARD_MAX])
        if unheard:
            from viplanes.cluster.handoff import notify_done

            with self.db.write() as s:
                notify_done(s, unheard)

    def remove_ended(self, lane_ids: set[int]) -> None:
        """Flows of lanes whose committed rows say they ended (never revived: an ended state is
        terminal), all in one batch."""
        carried = [lane_id for lane_id in sorted(lane_ids) if lane_id in self.plane.lanes]
        failure = self.plane.deactivate_many(carried)  # and any queued removal left over
        if failure:
            log.warning("removal of %d lanes not confirmed (%s)", len(carried), failure)

    def handoff_round(self, woken: list[str]) -> None:
        """One round of the master: activate every waiting lane, remove every ended one."""
        wanted = payload_ids(woken, "lane:")  # recover reads the installing rows itself
        ended = payload_ids(woken, "ended:")
        named = [lane_id for lane_id in ended if lane_id in self.plane.lanes]
        # only the rows decide: a forged "ended:<id>" of a live lane reads "active" and stays
        carried = sorted(not_carried(self.db, named, self.manager.clock()))
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
