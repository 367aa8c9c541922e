"""Lane changes: the one path by which lanes are activated and removed on the switches.

One lane (``activate``, ``begin_deactivate``) is a batch of one. The split deployment's master
(issue 12) takes every lane waiting for it at once: it compiles them all, sends every
switch its share of their flow-mods followed by ONE barrier, and waits for all barriers together.
A lane counts as installed only when every switch of its path confirmed the barrier and no error
named one of its own messages; a switch that refuses one lane's flow-mod fails that lane alone,
and a switch that does not confirm leaves the lanes crossing it with a transient reason (the lane
manager keeps them ``installing`` for the next round). Lanes that ended meanwhile are removed in
the same messages (``queue_removals``): their deletes come first in each switch's list, so one
round costs one barrier per switch whatever it adds and removes; a new NAT takeover adds one
more round, its forward diversion sent after the rest of it was confirmed (``_divert``,
``takeover.split_diversion``). Deciding the outcome is pure
(``outcome.lane_failures``); ``Changes`` compiles, sends and waits, holding ``state.change`` from the
first compile to the last barrier (``SwitchState``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.controller.compile import groups, hold, lanediff, takeover
from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile import shared as sharedflows
from viplanes.controller.compile.removal import group_holders
from viplanes.controller.runtime.inflight import InFlight, collect
from viplanes.controller.runtime.outcome import Outcome, SwitchAnswer, lane_failures, merge
from viplanes.controller.runtime.pending import Batch
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.switchfacts import table_full_dpids
from viplanes.controller.runtime.wire import Staged, Wire, meter_errors_only
from viplanes.domain.values import ActivationResult, LaneSpec

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")
# From a takeover's first step confirmed to its diversion (docs/dataplane.md): Open vSwitch answers
# a barrier once its flow table changed and moves cached datapath flows at its revalidators' next
# sweep (1 ms in the lab); a hardware switch may commit its table after the barrier too. 100x that,
# on a takeover whose goal is 3 s.
DIVERT_GRACE_S = 0.1


def _none(dpids: list[int]) -> None:
    return None


class Changes:
    """Activate and remove lanes: alone (a batch of one) or many at once, one barrier per switch."""

    def __init__(self, state: SwitchState, wire: Wire, on_table_full: Callable[[list[int]], None] = _none) -> None:
        self.state = state
        self.wire = wire
        self.on_table_full = on_table_full  # switches that refused for a full table: learn (switchfacts)
        self._queue_lock = threading.Lock()  # the queued removals (never held long)
        self._queued: set[int] = set()

    # ---- the entry points ---------------------------------------------------------------------
    def activate(self, lane: LaneSpec, timeout_s: float = 5.0) -> ActivationResult:
        """One lane: ``activate_many([lane])`` without taking the queued removals."""
        t0 = time.perf_counter()
        if self.state.topology is None:
            return ActivationResult(False, "controller has no topology", 0.0)
        self.wait_for_switches(lane)  # outside the lock: reconciles go on
        return self._begin([lane], [], timeout_s, t0)()[0][lane.lane_id]

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        """Install every lane (and remove the queued ones) with one barrier per switch; each lane
        gets its own result."""
        for lane in lanes:
            self.wait_for_switches(lane)  # returns at once when connected
        return self._begin(lanes, self._take_removals(), timeout_s, time.perf_counter())()[0]

    def begin_deactivate(self, lane_id: int, timeout_s: float = 5.0) -> Callable[[], None]:
        """Send the lane's deletes now and return the function that waits for their barriers;
        the caller (the same thread) must call it exactly once, even on error. Lets a release
        commit its state while the switches work; the change lock is held until it is called."""
        wait = self._begin([], [lane_id], timeout_s, time.perf_counter())

        def finish() -> None:
            failure = wait()[1]
            if failure:
                LOG.warning(
                    "lane %d: removal not confirmed (%s); the next drift check reconciles its switches",
                    lane_id,
                    failure,
                )

        return finish

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None:
        """Delete several lanes' flows (and the queued ones') and the shared flows no remaining
        lane needs, one barrier per switch. None, or why a switch did not confirm (the drift
        check then reconciles it)."""
        return self._begin([], sorted({*lane_ids, *self._take_removals()}), timeout_s, time.perf_counter())()[1]

    def queue_removals(self, lane_ids: Iterable[int]) -> None:
        """Lanes whose flows must go: sent with the next batch of activations (one barrier per
        switch for both), or by ``deactivate_many`` when no activation comes."""
        with self._queue_lock:
            self._queued.update(lane_ids)

    def _take_removals(self) -> list[int]:
        with self._queue_lock:
            queued, self._queued = self._queued, set()
        return sorted(queued)

    def wait_for_switches(self, lane: LaneSpec) -> None:
        """Give the switches of the lane's path ``state.switch_wait_s`` to (re)connect."""
        if self.state.topology is None:
            return  # the activation fails: no topology
        try:
            needed = compiler.path_dpids(lane, self.state.topology)
        except ValueError:
            return  # the activation reports the compile error
        self.state.wait_until_connected(needed, self.state.switch_wait_s)

    # ---- the one path -------------------------------------------------------------------------
    def _begin(self, lanes: list[LaneSpec], removals: list[int], timeout_s: float, t0: float) -> Callable[[], Outcome]:
        """Take the change lock, compile and send; the returned function waits for the barriers,
        records the outcome and gives the lock back (call it exactly once, on the same thread)."""
        state = self.state
        state.change.acquire()
        try:
            sending = self._send(lanes, removals, timeout_s, t0)
        except BaseException:
            state.change.release()
            raise

        def finish() -> Outcome:
            try:
                return self._finish(lanes, timeout_s, t0, sending)
            finally:
                state.change.release()

        return finish

    def _send(self, lanes: list[LaneSpec], removals: list[int], timeout_s: float, t0: float) -> InFlight:
        """Under the change lock: compile every change, send each switch its share + one barrier."""
        state = self.state
        results: dict[int, ActivationResult] = {}
        wanted = {ln.lane_id for ln in lanes}
        # removals first in each switch's list: a new lane's shared flows are re-added after
        per_lane = self._removal_messages([i for i in removals if i not in wanted], lanes)
        removing = set(per_lane)
        held: dict[int, str] = {}
        diversions: dict[int, dict[int, list[Any]]] = {}  # new takeovers: sent last (``_divert``)
        for lane in lanes:
            if state.topology is None:  # removals still go out: by cookie, to every switch
                results[lane.lane_id] = ActivationResult(False, "controller has no topology", 0.0)
                continue
            try:
                compiled, why_held = self._compile_to_send(lane)
            except Exception as exc:
                if not isinstance(exc, ValueError):
                    LOG.exception("lane %d could not be compiled", lane.lane_id)
                results[lane.lane_id] = ActivationResult(False, str(exc), time.perf_counter() - t0)
                continue
            state.note_changed(compiled)  # for the drift probe: only these switches change
            if why_held is None:
                path = compiler.path_dpids(lane, state.topology)
            else:  # no usable path now: carried, held at its first switch (``hold``)
                path = hold.held_dpids(lane, state.topology)
                held[lane.lane_id] = state.held_reason() if state.held_reason is not None else why_held
            missing = [d for d in path if d not in state.connected]
            compiled = {d: msgs for d, msgs in compiled.items() if d in state.connected}  # a backup's may wait
            if missing:  # nothing sent for a lane whose path is not all there
                results[lane.lane_id] = ActivationResult(
                    False, f"{state.switch_name(missing[0])} not connected", time.perf_counter() - t0
                )
            elif lane.takeover is not None and why_held is None and lane.lane_id not in state.lanes:
                per_lane[lane.lane_id], diversions[lane.lane_id] = takeover.split_diversion(
                    lane, state.topology, compiled
                )
            else:
                per_lane[lane.lane_id] = compiled
        lenient: set[int] = set()
        per_dpid, owner = merge(per_lane, state.xid, lenient)
        deadline = time.monotonic() + timeout_s
        answers: dict[int, SwitchAnswer] = {}
        sent = self._write(per_dpid, answers)
        return InFlight(
            per_lane, removing, owner, sent, answers, results, deadline, frozenset(lenient), held, diversions
        )

    def _write(self, per_dpid: dict[int, list[Any]], answers: dict[int, SwitchAnswer]) -> list[Batch]:
        """Each switch its messages and one barrier; a switch they could not go to is answered."""
        staged: list[Staged] = []
        for dpid, msgs in per_dpid.items():
            ready = self.wire.stage(dpid, msgs)
            if isinstance(ready, str):
                answers[dpid] = SwitchAnswer(not_sent=ready)
            else:
                staged.append(ready)
        sent: list[Batch] = []
        for (dpid, _, _), batch in zip(staged, self.wire.write(staged), strict=True):
            if isinstance(batch, str):
                answers[dpid] = SwitchAnswer(not_sent=batch)
            else:
                sent.append(batch)
        return sent

    def _finish(self, lanes: list[LaneSpec], timeout_s: float, t0: float, flight: InFlight) -> Outcome:
        """Under the change lock: wait for the barriers, judge each lane, carry the installed
        ones and remove what a failed new lane left behind (fail closed)."""
        state = self.state
        per_lane, owner, answers, results = flight.per_lane, flight.owner, flight.answers, flight.results
        removal_failure = collect(self.state, flight.sent, flight)
        if flight.diversions:
            self._divert(flight)
        if full := table_full_dpids(flight.sent):  # counted before the rollback below
            self.on_table_full(full)
        if not lanes:
            return results, removal_failure
        failures = lane_failures(
            {lid: d.keys() for lid, d in per_lane.items() if lid not in flight.removing},
            answers,
            owner,
            state.switch_name,
            timeout_s,
        )
        by_id = {ln.lane_id: ln for ln in lanes}
        for lane_id, failure in failures.items():  # carried first: a failed lane's removal
            if failure is None:  # keeps the shared flows they need
                state.lanes[lane_id] = by_id[lane_id]
                why = flight.held.get(lane_id)
                results[lane_id] = ActivationResult(
                    True, "installed" if why is None else why, time.perf_counter() - t0, held=why is not None
                )
        for lane_id, failure in failures.items():
            if failure is None:
                continue
            lane = by_id[lane_id]
            if not state.may_write() and "not master" not in failure:
                failure = f"{failure} (this controller is not master any more)"
            if lane_id not in state.lanes:
                # fail closed: no half-installed lane stays behind. A lane already carried
                # (re-sent after an extension) keeps its flows and their old deadline.
                self._remove(
                    lane_id, list(per_lane[lane_id]), bool(lane.rate_mbps), timeout_s, state.lanes.orphaned(lane)
                )
            results[lane_id] = ActivationResult(False, failure, time.perf_counter() - t0)
        return results, removal_failure

    def _divert(self, flight: InFlight) -> None:
        """The second step of new takeover lanes (``takeover.split_diversion``): for each whose
        first step every switch confirmed, after ``DIVERT_GRACE_S`` for the switches' cached
        datapath flows to follow, its forward diversion, with one more barrier per switch."""
        ready = lane_failures(
            {lid: flight.per_lane[lid].keys() for lid in flight.diversions},
            flight.answers,
            flight.owner,
            self.state.switch_name,
            0.0,
        )
        moving = {lid: flight.diversions[lid] for lid, failure in ready.items() if failure is None}
        if not moving:
            return
        time.sleep(DIVERT_GRACE_S)
        per_dpid, owner = merge(moving, self.state.xid)
        flight.owner.update(owner)
        for lane_id, by_dpid in moving.items():
            for dpid, msgs in by_dpid.items():
                flight.per_lane[lane_id].setdefault(dpid, []).extend(msgs)
        sent = self._write(per_dpid, flight.answers)
        collect(self.state, sent, flight)
        flight.sent.extend(sent)

    # ---- what is sent -------------------------------------------------------------------------
    def _compile_to_send(self, lane: LaneSpec) -> tuple[dict[int, list[Any]], str | None]:
        """What an activation sends for one lane: its flows, the shared flows of its addresses
        (ADD is idempotent when another live lane already installed them) and, for a re-sent
        lane whose destinations or ports changed, the deletes of what its new spec no longer
        has (after the ADDs, issue 11); and why it is held, when no usable path is left now
        (its flows then hold it at its first switch, and a re-route carries it when a path
        returns). Under the change lock; ValueError: it cannot be compiled."""
        state = self.state
        assert state.topology is not None
        state.touch(lane.lane_id, lane)
        meters_exist = lane.lane_id in state.lanes and bool(lane.rate_mbps)
        per_dpid, why_held = hold.compile_or_hold(
            lane,
            state.topology,
            state.clock(),
            meter_command=ofp.OFPMC_MODIFY if meters_exist else ofp.OFPMC_ADD,
        )
        state.note_lane_flows(lane, per_dpid)  # the drift probe's expectation
        if (not meters_exist or why_held is not None) and state.flows is not None:  # a re-route moves it from these
            with state.compile_lock:
                state.flows.put(lane, {dpid: list(msgs) for dpid, msgs in per_dpid.items()}, held=why_held)
        for address_flows in state.lanes.shared_flows(lane).values():
            for dpid, msgs in address_flows.items():
                per_dpid.setdefault(dpid, []).extend(msgs)
        carried = state.lanes.get(lane.lane_id)
        if carried is not None and carried != lane:
            for dpid, msgs in lanediff.stale_deletes(carried, per_dpid, state.topology, state.clock()).items():
                per_dpid.setdefault(dpid, []).extend(msgs)
        if carried is not None:  # its groups may be there, with an older path's buckets
            per_dpid = groups.add_then_modify(per_dpid)
        return per_dpid, why_held

    def _removal_messages(self, lane_ids: list[int], keep: list[LaneSpec]) -> dict[int, dict[int, list[Any]]]:
        """Under the change lock: forget the lanes, and compile their removal plus that of the
        shared flows that neither a carried lane nor one of ``keep`` (being activated) needs."""
        state = self.state
        gone: list[tuple[int, LaneSpec | None]] = []
        for lane_id in lane_ids:
            state.touch(lane_id, state.lanes.get(lane_id))
            gone.append((lane_id, state.lanes.pop(lane_id, None)))
        out: dict[int, dict[int, list[Any]]] = {}
        for lane_id, lane in gone:
            dpids = self._lane_dpids(lane)
            state.note_changed(dpids)
            msgs = compiler.compile_lane_removal(
                lane_id,
                [d for d in dpids if d in state.connected],
                with_meter=bool(lane and lane.rate_mbps),
                newconn_at=compiler.newconn_border(state.topology),
                groups_at=group_holders(state.topology, dpids),
            )
            if lane is not None:
                addresses = state.lanes.orphaned(lane, keep)  # O(its own flows)
                for dpid, extra in sharedflows.compile_shared_removal(addresses, state.topology).items():
                    if dpid in state.connected:
                        msgs.setdefault(dpid, []).extend(extra)
            out[lane_id] = msgs
        return out

    def _remove(
        self, lane_id: int, dpids: list[int], with_meter: bool, timeout_s: float, addresses: dict[int, set[str]]
    ) -> str | None:
        """Delete a failed new lane's flows and the shared flows of ``addresses`` (dpid ->
        addresses no carried lane uses), in one batch per switch; a second round trip."""
        state = self.state
        msgs = compiler.compile_lane_removal(
            lane_id,
            [d for d in dpids if d in state.connected],
            with_meter=with_meter,
            newconn_at=compiler.newconn_border(state.topology),
            groups_at=group_holders(state.topology, dpids),
        )
        for dpid, extra in sharedflows.compile_shared_removal(addresses, state.topology).items():
            if dpid in state.connected:
                msgs.setdefault(dpid, []).extend(extra)
        return self.wire.send_all(msgs, timeout_s, tolerate=meter_errors_only)()

    def _lane_dpids(self, lane: LaneSpec | None) -> list[int]:
        if lane is None or self.state.topology is None:
            return sorted(self.state.connected)
        try:
            return list(compiler.lane_dpids(lane, self.state.topology))
        except ValueError:
            return sorted(self.state.connected)
