"""Reconcile and refresh: each switch's app flows made equal to the desired lanes.

Reads the desired lanes (the database) and each switch's app flows and sends only the
difference (``reconcile.plan_switch``); ``batch.Changes`` changes lanes one batch at a time. Both
share ``state.change``: a reconcile reads and compares without it and applies its plan under
it, minus the lanes changed meanwhile (``SwitchState.touch`` / ``changed_since``).

Locks: ``_reconcile_slots`` (at most ``RECONCILES_AT_ONCE`` switches read back at once), then
``_read_lock`` (one read of the desired lanes at a time), then ``state.change`` /
``state.compile_lock`` briefly; never the other way round.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import groups, reconcile
from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.openflow.handshakes import ADMISSION_FIRST_S
from viplanes.controller.runtime import heap
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import Wire, meter_errors_only
from viplanes.domain.values import LaneSpec

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")


# How long one read of the desired lanes serves the reconciles of other switches (if no lane
# changed meanwhile): all switches reconnecting after a restart share one read (issue 13).
READ_REUSE_S = 2.0
# Switch reconciles that read back and compare at once. A restart reconnects every switch at
# once; 140 reconciles in parallel (and OVS dumping their flows) starved the TLS handshakes of the
# switches still connecting, OVS dropped those after its ~1 s connect window and came back only
# after its backoff. The reconciles' total work is the same either way.
RECONCILES_AT_ONCE = 8


@dataclass(frozen=True)
class LaneRead:
    """One read of the desired lanes: the generation it is good for, when, and the lanes by
    the switches their paths cross."""

    generation: int
    at: float  # state.clock(): the runtime's steady clock, which tests move by hand
    lanes: tuple[LaneSpec, ...]
    by_dpid: dict[int, tuple[LaneSpec, ...]]


class Resync:
    """Reconcile one switch or all of them against the desired lanes."""

    def __init__(self, state: SwitchState, wire: Wire) -> None:
        self.state = state
        self.wire = wire
        self._restarted: dict[int, dict[Any, float]] = {}  # dpid -> flow_key -> MODIFY refresh time
        self._read_lock = threading.Lock()  # one read of the desired lanes at a time
        self._reconcile_slots = threading.BoundedSemaphore(RECONCILES_AT_ONCE)
        self._last_read: LaneRead | None = None  # shared by the reconciles of a round
        self.lane_reads = 0  # reads of the desired lanes so far (tests, metrics)

    def desired(
        self,
        now: float,
        dpid: int | None = None,
        generation: int | None = None,
    ) -> tuple[dict[int, list[Any]], dict[int, LaneSpec]]:
        """Desired ofmsgs per dpid (all lanes, or those crossing ``dpid``) and the lanes they
        carry. Raises when the source fails: a failed read must never look like "no lanes"
        (that would delete every lane). ``generation``: the caller's ``state.reading`` generation."""
        if self.state.flows is None:
            return {}, {}
        read = self._read_lanes(generation)
        lanes = read.lanes if dpid is None else read.by_dpid.get(dpid, ())
        self._compile(lanes, now, dpid)
        with self.state.compile_lock:
            return self.state.flows.build(lanes, now, dpid)  # all compiled: re-time and collect

    def _read_lanes(self, generation: int | None = None, fresh: bool = False) -> LaneRead:
        """The desired lanes, indexed by switch; read once for every switch that reconciles
        within ``READ_REUSE_S`` (a restart reconciles every switch at once: one read, not one per
        switch) unless a lane changed since. Concurrent callers wait for one read in flight.
        ``fresh``: read now (warm-up and the periodic round, which look for what changed in the
        database behind this controller's back); the switches after it reuse that read."""
        with self._read_lock:
            with self.state.change:
                current = self.state.generation
            last = self._last_read
            if (
                not fresh
                and last is not None
                and last.generation == current
                and (generation is None or last.generation >= generation)
                and self.state.clock() - last.at < READ_REUSE_S
            ):
                return last
            # anything changed after ``current`` is left out by ``changed_since`` of every
            # reconcile using this read (their generation is <= current)
            lanes = tuple(self.state.source()) if self.state.source is not None else tuple(self.state.lanes.values())
            self.lane_reads += 1
            assert self.state.flows is not None
            with self.state.compile_lock:
                self.state.flows.forget_all_but(lanes)
                by_dpid = {d: tuple(ls) for d, ls in self.state.flows.by_switch(lanes).items()}
            self._last_read = LaneRead(current, self.state.clock(), lanes, by_dpid)
            return self._last_read

    def forget_lane_read(self) -> None:
        """The next reconcile reads the desired lanes again (an operator's drift check or
        reconcile looks for changes made behind this controller's back)."""
        with self._read_lock:
            self._last_read = None

    def _compile(
        self, lanes: tuple[LaneSpec, ...], now: float, dpid: int | None, chunk: int = 25
    ) -> None:  # dpid: for the caller's reading only
        """Compile (and key) what is not compiled yet, a chunk per hold of the compile lock:
        locks are not fair, and a switch that needs nothing new should not wait for thousands
        of lanes compiled for another one."""
        assert self.state.flows is not None
        flows = self.state.flows
        with self.state.compile_lock:
            todo = [ln for ln in lanes if not flows.compiled(ln)]
        for i in range(0, len(todo), chunk):
            with self.state.compile_lock:
                for lane in todo[i : i + chunk]:
                    if flows.compiled(lane):
                        continue  # warm-up or another switch's reconcile got there first
                    for msgs in (flows.lane(lane, now) or {}).values():
                        for msg in msgs:
                            if isinstance(msg, parser.OFPFlowMod):
                                reconcile.cached_key(msg)
            time.sleep(0.001)

    def _compile_base(self, chunk: int = 8) -> int:
        """Every switch's base flows and their identities, a few switches per hold of the
        compile lock: after a restart each switch's reconcile then only reads back and compares
        (the host guards of 140 switches were ~0.3 s of a restart's reconciles)."""
        assert self.state.flows is not None and self.state.topology is not None
        flows = self.state.flows
        dpids = [sw.dpid for sw in self.state.topology.switches]
        for i in range(0, len(dpids), chunk):
            with self.state.compile_lock:
                for dpid in dpids[i : i + chunk]:
                    for msg in flows.base(dpid):
                        if isinstance(msg, parser.OFPFlowMod):
                            reconcile.cached_key(msg)
            time.sleep(0.001)
        return len(dpids)

    def warm_up(self) -> None:
        """Compile the desired lanes and their flow identities now, while switches are still
        (re)connecting, so their reconciles only read back and compare."""
        if self.state.flows is None or self.state.source is None:
            return
        t0 = time.perf_counter()
        try:
            lanes = self._read_lanes(fresh=True).lanes
        except Exception:
            LOG.exception("reading the desired lanes failed")
            return
        # tens of thousands of long-lived messages: the cyclic GC walked them again and again
        # (430 collections, 0.8 of 1.6 s for 1,000 lanes on 140 switches); one full collection
        # follows (the freeze below)
        with heap.gc_held():
            self._compile(lanes, self.state.clock(), None)
            switches = self._compile_base()
        LOG.info(
            "compiled %d desired lanes and the base flows of %d switches in %.0f ms",
            len(lanes),
            switches,
            (time.perf_counter() - t0) * 1000,
        )
        # and frozen, whatever the number of lanes: the base flows of every switch (35,000
        # messages at 140 switches) and everything imported live as long as the process. Left
        # in the young heap, each full collection walked them: 310,000 objects, 176 ms of CPU
        # inside one activation at 128 access switches, against 207,000 at 4
        self.state.heap.freeze_survivors(lanes=len(lanes) if len(lanes) >= heap.BULK_LANES else None)

    def reconcile_switch(self, dpid: int, timeout_s: float = 10.0) -> reconcile.Plan | None:
        """Diff the switch's app flows against the desired ones and send only the difference.

        Reading and comparing run without the change lock (20,000 flows take a second), so
        activations go on meanwhile; lanes activated or removed since the desired lanes were
        read are left out of the plan (their own change already did the right thing)."""
        t0 = time.perf_counter()
        if not self.state.may_write():  # not master (any more): it would plan from a stale view
            LOG.info("%s: not reconciled, this controller may not write", self.state.switch_name(dpid))
            return None
        if self.state.topology is not None and self.state.topology.switch_by_dpid(dpid) is None:
            LOG.warning(
                "%s is not in topology %s: nothing installed", self.state.switch_name(dpid), self.state.topology.name
            )
            return None
        plan = None
        if self.state.handshakes is not None:
            # switches still connecting go first: a reconcile slowed their handshakes past
            # OVS's connect timeout, and a dropped switch comes back only after its backoff
            self.state.handshakes.wait_idle(ADMISSION_FIRST_S)
        try:
            with self._reconcile_slots, self.state.reading() as generation, heap.gc_held():
                plan = self._reconcile(dpid, generation, t0, timeout_s)  # t0 before: waits count
        finally:
            if plan is None and dpid in self.state.connected:
                # not reconciled, so not ready: lanes through it would wait for the periodic
                # round (minutes). The drift round retries it, with its back-off.
                self.state.mark_suspect([dpid])
        if plan is not None and self.state.heap.grew_by_a_bulk(len(self.state.lanes)):
            self.state.heap.freeze_survivors(lanes=len(self.state.lanes))  # a bulk reconcile's lanes are long-lived
        return plan

    def _reconcile(self, dpid: int, generation: int, t0: float, timeout_s: float) -> reconcile.Plan | None:
        lanes: dict[int, LaneSpec] = {}
        desired_at = self.state.clock()
        if self.state.topology is None:
            wanted: list[Any] = [reconcile.default_forwarding()]
        else:
            try:
                per_dpid, lanes = self.desired(desired_at, dpid, generation)
            except Exception:
                LOG.exception("reading the desired lanes failed; %s left as it is", self.state.switch_name(dpid))
                return None
            wanted = per_dpid.get(dpid, [])
        t_desired = time.perf_counter()
        actual = self.wire.flow_stats(dpid, *ALL_APP_FLOWS, timeout_s=timeout_s)
        if actual is None:
            LOG.warning("%s: no flow stats, reconcile skipped", self.state.switch_name(dpid))
            return None
        group_plan = self.group_plan(dpid, wanted, timeout_s)
        if group_plan is None:
            LOG.warning("%s: no group list, reconcile skipped", self.state.switch_name(dpid))
            return None
        t_read = time.perf_counter()
        now = self.state.clock()
        restarted = self._restarted.setdefault(dpid, {})
        plan = reconcile.with_groups(reconcile.plan_switch(wanted, actual, now, restarted, desired_at), group_plan)
        phases = (
            f"desired {(t_desired - t0) * 1000:.0f} ms, flows read back {(t_read - t_desired) * 1000:.0f} ms, "
            f"compared {(time.perf_counter() - t_read) * 1000:.0f} ms"
        )
        wait = time.perf_counter()
        with self.state.change:
            wait = time.perf_counter() - wait
            self.state.applied += 1
            touched = self.state.changed_since(generation)
            if touched:
                addresses = {a for a, gen in self.state.touched_addresses.items() if gen > generation}
                plan = reconcile.without_lanes(plan, touched, addresses)
            news = {lid: ln for lid, ln in lanes.items() if lid not in touched and self.state.lanes.get(lid) != ln}
            self.state.lanes.update(news)
            # lanes new to the runtime move the counts of every switch on their paths
            self.state.note_changed(None if news else [dpid])
            if restarted:  # empty after a restart: no set of every wanted flow under the lock
                live = {reconcile.cached_key(m) for m in wanted if hasattr(m, "match")}
                for key in [k for k in restarted if k not in live]:
                    del restarted[key]
            for msg in plan.refreshes:
                if msg.command == ofp.OFPFC_MODIFY_STRICT:
                    restarted[reconcile.cached_key(msg)] = now
            if not plan.empty:
                failure = self.wire.apply({dpid: plan.ofmsgs}, timeout_s, tolerate=meter_errors_only)
                if failure:
                    LOG.warning("reconcile of %s: %s", self.state.switch_name(dpid), failure)
            became_ready = dpid not in self.state.reconciled
            self.state.reconciled[dpid] = plan
        if became_ready and self.state.on_ready is not None:  # lanes waiting for it: now, not in 2 s
            self.state.on_ready()
        LOG.info(
            "reconciled %s: kept %d, added %d, deleted %d, refreshed %d in %.1f ms "
            "(%.1f ms of it waiting for other changes; %s)",
            self.state.switch_name(dpid),
            plan.kept,
            len(plan.adds),
            len(plan.deletes),
            len(plan.refreshes),
            (time.perf_counter() - t0) * 1000,
            wait * 1000,
            phases,
        )
        return plan

    def group_plan(self, dpid: int, wanted: list[Any], timeout_s: float) -> groups.GroupPlan | None:
        """The switch's fast-failover group changes (read back like its flows); nothing to do
        on a switch without groups; None when it did not list its groups although it holds ours."""
        topo = self.state.topology
        sw = topo.switch_by_dpid(dpid) if topo is not None else None
        if sw is None or not sw.caps.features.fast_failover:
            return groups.GroupPlan(first=(), last=(), kept=0)
        actual = self.wire.group_descs(dpid, timeout_s)
        if actual is None:
            return None
        return groups.plan_groups(wanted, actual)

    def reconcile_all(self) -> None:
        """Every switch, and forget lanes the source no longer wants (the periodic round)."""
        if not self.state.may_write():
            return
        if self.state.source is not None and self.state.topology is not None:
            with self.state.reading() as generation:
                try:
                    live = {ln.lane_id for ln in self._read_lanes(generation, fresh=True).lanes}
                except Exception:
                    LOG.exception("reading the desired lanes failed")
                    return
                with self.state.change:
                    keep = live | self.state.changed_since(generation)
                    self.state.applied += 1
                    for lane_id in [lid for lid in self.state.lanes if lid not in keep]:
                        del self.state.lanes[lane_id]
                    self.state.note_changed(None)
        for dpid in sorted(self.state.connected):
            self.reconcile_switch(dpid)
