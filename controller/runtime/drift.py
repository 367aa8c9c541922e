"""Drift within seconds: a cheap periodic count of each switch's app flows.

A part of :class:`~viplanes.controller.runtime.lane_runtime.LaneRuntime`. Flows deleted behind the
controller's back on a switch that stays connected (``ovs-ofctl del-flows``, a removal or an
activation that was never confirmed), and a switch whose reconcile did not complete (so it is not
ready and lanes through it wait), would otherwise come back only at the periodic full
reconcile (``embedded.REFRESH_PERIOD_S``, minutes). Every ``DRIFT_PERIOD_S`` the embedded
controller calls ``check_drift``: per connected, reconciled switch (at most ``PROBES_PER_ROUND``
a round, round robin) one OFPMP_AGGREGATE request over the app's cookie range (the switch answers with a single count, no flow bodies) compared
with the number of flows the runtime expects there; a count outside the expected range, or a
switch marked *suspect* (a change to it was not confirmed), gets ``reconcile_switch``.

The expected count is computed from the lanes the runtime carries (``state.lanes``): base flows
plus, per lane, the FlowMods it compiles to on that switch (counted once per lane, from the
activation's own compile or the desired-flows cache) plus the shared per-address flows, each
once. Hard timeouts make it a range: flows of a lane within ``EXPIRY_SLACK_S`` of its end may or
may not be there yet, flows of a lane further past its end must be gone. So a lane's normal
expiry never triggers a reconcile. A reconcile that finds nothing to change means the count
itself is off (a lane the database no longer lists, say): that (expected, actual) signature is
muted until either number changes, so a counting mismatch can never loop reconciles.

A probe is skipped when a change (activation, removal, reconcile plan) is under way or lands
while it waits for the reply: it would compare against a moving target.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import reconcile
from viplanes.controller.compile.cookies import ALL_APP_FLOWS
from viplanes.controller.runtime.switches import SwitchState, flow_mod_counts
from viplanes.controller.runtime.wire import Wire
from viplanes.domain.values import LaneSpec

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
DRIFT_PERIOD_S = 2.0  # how often each connected switch's flows are counted
BACKOFF_MAX_S = 60.0  # longest wait between reconciles of a switch that keeps disagreeing
# Count probes per round at most: every switch every DRIFT_PERIOD_S up to this many switches;
# beyond, each switch within ceil(switches / PROBES_PER_ROUND) rounds (128 access switches,
# 140 in all: every ~10 s) and serve's background CPU stops growing with the campus.
PROBES_PER_ROUND = 32
EXPIRY_SLACK_S = 5.0  # around a lane's end its flows may or may not be there (OVS expiry, clock)
Range = tuple[int, float]  # (fewest, most) flows a switch may hold; most may be inf


class DriftWatch:
    """Count each switch's app flows now and then; reconcile a switch whose count is off."""

    def __init__(
        self, state: SwitchState, wire: Wire, reconcile_switch: Callable[[int], reconcile.Plan | None]
    ) -> None:
        self.state = state
        self.wire = wire
        self.reconcile_switch = reconcile_switch  # Resync's
        self._base_counts: dict[int, int] = {}  # dpid -> its base flows, counted on first probe
        self._muted: dict[int, tuple[int, float, int]] = {}  # dpid -> (lo, hi, actual)
        self.drift_reconciles = 0  # reconciles the probe started (tests, metrics)
        self._calm: dict[int, tuple[float, float]] = {}  # dpid -> (not before, next delay)
        self._probed_last = -1  # dpid of the last count probe (rounds go on from there)

    def _unchanged_since(self, dpid: int, epoch: int) -> bool:
        return max(self.state.changed_at.get(dpid, 0), self.state.any_changed_at) <= epoch

    # ---- expected counts ---------------------------------------------------------------------
    def _lane_counts(self, lane: LaneSpec, now: float) -> dict[int, int] | None:
        counts = self.state.lane_flow_counts.get(lane)
        if counts is None and self.state.flows is not None and lane.expires_at > now:
            with self.state.compile_lock:
                per_dpid = self.state.flows.lane(lane, now)
            if per_dpid is not None:
                counts = self.state.lane_flow_counts[lane] = flow_mod_counts(per_dpid)
        return counts

    def _base_count(self, dpid: int) -> int:
        """The switch's base flows, counted once. A probed switch is reconciled, so its base
        flows are compiled already; counting every switch's up front compiled the base flows of
        the whole campus (140 switches x ~1,000 host guards: 2.4 s) in the middle of a restart."""
        count = self._base_counts.get(dpid)
        if count is None:
            assert self.state.flows is not None
            with self.state.compile_lock:
                count = self._base_counts[dpid] = flow_mod_counts({dpid: self.state.flows.base(dpid)})[dpid]
        return count

    def expected_flow_counts(self, now: float, dpids: Iterable[int] | None = None) -> dict[int, Range]:
        """dpid -> (fewest, most) app flows it should hold now: for ``dpids``, or every switch."""
        if self.state.topology is None or self.state.flows is None:
            return {}
        wanted = [sw.dpid for sw in self.state.topology.switches] if dpids is None else list(dpids)
        lo: dict[int, int] = {dpid: self._base_count(dpid) for dpid in wanted}
        hi: dict[int, float] = dict(lo)
        certain: list[LaneSpec] = []
        maybe: list[LaneSpec] = []
        lanes = list(self.state.lanes.values())
        live = set(lanes)
        for lane in [ln for ln in self.state.lane_flow_counts if ln not in live]:
            del self.state.lane_flow_counts[lane]
        for lane in lanes:
            sure = lane.expires_at > now + EXPIRY_SLACK_S
            (certain if sure else maybe).append(lane)  # its shared flows have no hard timeout
            if not sure and lane.expires_at <= now - EXPIRY_SLACK_S:
                continue  # its hard timeout has removed its own flows
            counts = self._lane_counts(lane, now)
            if counts is None:  # could not count it (it ends now): any number will do
                for dpid in self.state.flows.dpids_of(lane):
                    hi[dpid] = float("inf")
                continue
            for dpid, n in counts.items():
                hi[dpid] = hi.get(dpid, 0) + n
                if sure:
                    lo[dpid] = lo.get(dpid, 0) + n
        with self.state.compile_lock:
            shared_lo = self._shared_keys(certain)
            shared_hi = self._shared_keys(certain + maybe)
        for dpid, keys in shared_lo.items():
            lo[dpid] = lo.get(dpid, 0) + len(keys)
        for dpid, keys in shared_hi.items():
            hi[dpid] = hi.get(dpid, 0) + len(keys)
        keep = None if dpids is None else set(wanted)
        return {dpid: (lo.get(dpid, 0), hi[dpid]) for dpid in hi if keep is None or dpid in keep}

    def _shared_keys(self, lanes: list[LaneSpec]) -> dict[int, set[Any]]:
        """dpid -> identities of the shared flows these lanes need (two lanes of one lane
        address need its ARP reply once)."""
        assert self.state.flows is not None
        return {
            dpid: {reconcile.cached_key(m) for m in msgs if isinstance(m, parser.OFPFlowMod)}
            for dpid, msgs in self.state.flows.shared(lanes).items()
        }

    # ---- the probe ---------------------------------------------------------------------------
    def flow_count(self, dpid: int, timeout_s: float = 2.0) -> int | None:
        """How many app flows the switch holds (one aggregate-stats request), or None."""
        return self.wire.flow_count(dpid, *ALL_APP_FLOWS, timeout_s=timeout_s)

    def check_drift(self, timeout_s: float = 2.0) -> list[int]:
        """One round over the connected switches; the dpids it reconciled. Suspect switches
        are all handled; counts are probed on at most ``PROBES_PER_ROUND`` switches, round
        robin, so a campus of hundreds of switches costs what one of 32 does (issue 13)."""
        fixed: list[int] = []
        if not self.state.may_write():  # a deposed master plans no repair (its view may be stale)
            return fixed
        ready = [dpid for dpid in sorted(self.state.connected) if dpid in self.state.reconciled]
        # suspects include connected switches whose reconcile did not complete (no flow stats
        # in time, a database error): not ready until one does
        for dpid in [d for d in sorted(self.state.connected) if d in self.state.suspect]:
            if self._backing_off(dpid):
                continue
            self.state.suspect.discard(dpid)
            LOG.info("%s: a change was not confirmed; reconciling", self.state.switch_name(dpid))
            self._drift_reconcile(dpid)
            fixed.append(dpid)
        due = [d for d in ready if d not in fixed and d not in self.state.suspect]
        if len(due) > PROBES_PER_ROUND:  # the next ones after where the last round stopped
            start = next((i for i, d in enumerate(due) if d > self._probed_last), 0)
            due = (due[start:] + due[:start])[:PROBES_PER_ROUND]
        expectation: tuple[int, dict[int, Range]] | None = None
        for dpid in due:
            self._probed_last = dpid
            if expectation is None or not self._unchanged_since(dpid, expectation[0]):
                expectation = self._expectation(due)  # once per round unless this switch changed
                if expectation is None:
                    continue  # a change is being applied: count next time
            if self._probe(dpid, *expectation, timeout_s=timeout_s):
                fixed.append(dpid)
        return fixed

    def _expectation(self, dpids: list[int]) -> tuple[int, dict[int, Range]] | None:
        """(epoch, expected range of each of ``dpids``), or None while a change holds the change lock."""
        now = self.state.clock()
        for lane in list(self.state.lanes.values()):  # compile what must be, outside the change lock
            self._lane_counts(lane, now)
        if not self.state.change.acquire(blocking=False):
            return None
        try:
            return self.state.applied, self.expected_flow_counts(now, dpids)
        finally:
            self.state.change.release()

    def _probe(self, dpid: int, epoch: int, expected: dict[int, Range], timeout_s: float) -> bool:
        lo, hi = expected.get(dpid, (0, 0))
        actual = self.flow_count(dpid, timeout_s)
        if actual is None or not self._unchanged_since(dpid, epoch):
            return False  # no answer, or a change landed on it meanwhile: compare next time
        if lo <= actual <= hi:
            self._muted.pop(dpid, None)
            self._calm.pop(dpid, None)
            return False
        if self._muted.get(dpid) == (lo, hi, actual) or self._backing_off(dpid):
            return False
        LOG.warning(
            "%s holds %d app flows, expected %s: reconciling",
            self.state.switch_name(dpid),
            actual,
            lo if lo == hi else f"{lo}..{hi:g}",
        )
        plan = self._drift_reconcile(dpid)
        if plan is not None and plan.empty:
            # the switch already matches the database: our count is off, not the switch
            self._muted[dpid] = (lo, hi, actual)
        return True

    def _backing_off(self, dpid: int) -> bool:
        """True while a switch that keeps disagreeing waits for its next reconcile: the delay
        doubles from DRIFT_PERIOD_S up to BACKOFF_MAX_S (a switch refusing our flows must not
        cost a full reconcile every round) and resets once its count agrees."""
        not_before, _ = self._calm.get(dpid, (0.0, 0.0))
        return time.monotonic() < not_before

    def _drift_reconcile(self, dpid: int) -> reconcile.Plan | None:
        if not self.state.may_write():  # the lease ran out during this round's probes
            return None
        self.drift_reconciles += 1
        _, delay = self._calm.get(dpid, (0.0, 0.0))
        self._calm[dpid] = (time.monotonic() + delay, min(BACKOFF_MAX_S, max(DRIFT_PERIOD_S, delay * 2)))
        return self.reconcile_switch(dpid)  # one that does not complete marks the switch suspect
