"""Several lane changes in one round trip per switch (issue 12, the split deployment's churn).

The master controller takes every lane waiting for it at once: it compiles them all, sends every
switch its share of their flow-mods followed by ONE barrier, and waits for all barriers together.
A lane counts as installed only when every switch of its path confirmed the barrier and no error
named one of its own messages; a switch that refuses one lane's flow-mod fails that lane alone,
and a switch that does not confirm leaves the lanes crossing it with a transient reason (the lane
manager keeps them ``installing`` for the next round). Lanes that ended meanwhile are removed in
the same messages (``queue_removals``): their deletes come first in each switch's list, so one
round costs one barrier per switch whatever it adds and removes. Deciding the outcome is pure
(``lane_failures``); ``BatchChanges`` is the LaneRuntime mixin that compiles, sends and waits.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import lane as compiler
from viplanes.controller.compile import lanediff
from viplanes.controller.compile import shared as sharedflows
from viplanes.controller.runtime.carried import CarriedLanes
from viplanes.controller.runtime.pending import Batch, Tracker
from viplanes.domain.values import ActivationResult, LaneSpec
from viplanes.topologies.model import Topology

LOG = logging.getLogger("viplanes.controller.runtime.lane_runtime")

Staged = tuple[int, list[Any], Batch]  # (dpid, ofmsgs + barrier, the batch the tracker expects)

Tagged = list[tuple[int, Any]]  # (lane id, ofmsg) in send order
_QUEUE_LOCK = threading.Lock()  # the queued removals (one runtime per process; never held long)


@dataclass
class SwitchAnswer:
    """What one switch did with its part of a batch."""

    not_sent: str | None = None  # why it was not sent (not connected, not master)
    confirmed: bool = False  # its barrier reply arrived in time
    refused: dict[int, str] = field(default_factory=dict)  # xid -> the switch's error


def merge(per_lane: dict[int, dict[int, list[Any]]], xids: Iterator[int]) -> tuple[dict[int, Tagged], dict[int, int]]:
    """Per-lane per-switch messages -> per-switch (lane, message) lists with fresh xids, and
    xid -> lane. A message that already carries an xid (a cached one) is sent as a copy."""
    per_dpid: dict[int, Tagged] = {}
    owner: dict[int, int] = {}
    for lane_id, by_dpid in per_lane.items():
        for dpid, msgs in by_dpid.items():
            for msg in msgs:
                msg = copy.copy(msg) if msg.xid is not None else msg
                msg.xid = None
                msg.set_xid(next(xids))
                owner[msg.xid] = lane_id
                per_dpid.setdefault(dpid, []).append((lane_id, msg))
    return per_dpid, owner


def lane_failures(
    lane_dpids: dict[int, Iterable[int]],
    answers: dict[int, SwitchAnswer],
    owner: dict[int, int],
    name: Callable[[int], str],
    timeout_s: float,
) -> dict[int, str | None]:
    """lane id -> None (every switch of its path confirmed, none refused its messages) or the
    first reason it is not installed. Another lane's refusal on the same switch is not its own."""
    out: dict[int, str | None] = {}
    for lane_id, dpids in lane_dpids.items():
        failure = None
        for dpid in sorted(dpids):
            answer = answers.get(dpid, SwitchAnswer(not_sent=f"{name(dpid)} not connected"))
            if answer.not_sent:
                failure = answer.not_sent
            elif not answer.confirmed:
                failure = f"{name(dpid)} did not confirm within {timeout_s:g} s"
            else:
                mine = [err for xid, err in answer.refused.items() if owner.get(xid) == lane_id]
                failure = f"{name(dpid)} refused: {mine[0]}" if mine else None
            if failure:
                break
        out[lane_id] = failure
    return out


class BatchChanges:
    """``activate_many`` / ``deactivate_many`` for LaneRuntime (which supplies the rest)."""

    topology: Topology | None
    connected: set[int]
    lanes: CarriedLanes
    tracker: Tracker
    is_master: bool
    clock: Callable[[], float]
    send: Callable[[int, list[Any]], bool]
    _change: threading.RLock
    switch_wait_s: float

    if TYPE_CHECKING:  # LaneRuntime's (never defined here: they would shadow the mixins')

        def switch_name(self, dpid: int) -> str: ...
        def _xid(self) -> int: ...
        def _touch(self, lane_id: int, lane: LaneSpec | None = None) -> None: ...
        def note_lane_flows(self, lane: LaneSpec, per_dpid: dict[int, list[Any]]) -> None: ...
        def mark_suspect(self, dpids: list[int]) -> None: ...
        def _wait_for_switches(self, lane: LaneSpec, timeout_s: float) -> None: ...
        def _remove(
            self,
            lane_id: int,
            dpids: list[int],
            with_meter: bool,
            timeout_s: float,
            addresses: dict[int, set[str]] | None = None,
        ) -> str | None: ...
        def _orphaned_addresses(self, lane: LaneSpec) -> dict[int, set[str]]: ...
        def _write_staged(self, staged: list[Staged]) -> list[Batch | str]: ...
        def _apply(
            self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Callable[[Batch], bool] = lambda b: False
        ) -> str | None: ...

    def _compile_to_send(self, lane: LaneSpec) -> dict[int, list[Any]]:
        """What an activation sends for one lane, alone (``LaneRuntime.activate``) or in a batch:
        its flows, the shared flows of its addresses (ADD is idempotent when another live lane
        already installed them) and, for a re-sent lane whose destinations or ports changed, the
        deletes of what its new spec no longer has (after the ADDs, issue 11). Under the change
        lock; ValueError: it cannot be compiled."""
        assert self.topology is not None
        self._touch(lane.lane_id, lane)
        meters_exist = lane.lane_id in self.lanes and bool(lane.rate_mbps)
        per_dpid = compiler.compile_lane(
            lane, self.topology, self.clock(), meter_command=ofp.OFPMC_MODIFY if meters_exist else ofp.OFPMC_ADD
        )
        self.note_lane_flows(lane, per_dpid)
        for address_flows in self.lanes.shared_flows(lane).values():
            for dpid, msgs in address_flows.items():
                per_dpid.setdefault(dpid, []).extend(msgs)
        carried = self.lanes.get(lane.lane_id)
        if carried is not None and carried != lane:
            for dpid, msgs in lanediff.stale_deletes(carried, per_dpid, self.topology, self.clock()).items():
                per_dpid.setdefault(dpid, []).extend(msgs)
        return per_dpid

    def _stage_tagged(self, dpid: int, tagged: Tagged) -> Staged | str:
        if dpid not in self.connected:
            return f"{self.switch_name(dpid)} not connected"
        if not self.is_master:
            return f"{self.switch_name(dpid)} not changed: this controller is not master"
        barrier = parser.OFPBarrierRequest(None)
        barrier.set_xid(self._xid())
        msgs = [m for _, m in tagged]
        batch = self.tracker.expect_barrier(dpid, [m.xid for m in msgs], barrier.xid)
        return dpid, [*msgs, barrier], batch

    def queue_removals(self, lane_ids: Iterable[int]) -> None:
        """Lanes whose flows must go: sent with the next batch of activations (one barrier per
        switch for both), or by ``deactivate_many`` when no activation comes."""
        with _QUEUE_LOCK:
            self.__dict__.setdefault("_queued_removals", set()).update(lane_ids)

    def _take_removals(self) -> list[int]:
        with _QUEUE_LOCK:
            queued = self.__dict__.pop("_queued_removals", set())
        return sorted(queued)

    def activate_many(self, lanes: list[LaneSpec], timeout_s: float = 5.0) -> dict[int, ActivationResult]:
        """Install every lane (and remove the queued ones) with one barrier per switch; each lane
        gets its own result."""
        for lane in lanes:
            self._wait_for_switches(lane, self.switch_wait_s)  # returns at once when connected
        return self._change_many(lanes, self._take_removals(), timeout_s)[0]

    def deactivate_many(self, lane_ids: list[int], timeout_s: float = 5.0) -> str | None:
        """Delete several lanes' flows (and the queued ones') and the shared flows no remaining
        lane needs, one barrier per switch. None, or why a switch did not confirm (the drift
        check then reconciles it)."""
        return self._change_many([], sorted({*lane_ids, *self._take_removals()}), timeout_s)[1]

    def _removal_messages(self, lane_ids: list[int], keep: list[LaneSpec]) -> dict[int, dict[int, list[Any]]]:
        """Under the change lock: forget the lanes, and compile their removal plus that of the
        shared flows that neither a carried lane nor one of ``keep`` (being activated) needs."""
        gone: list[tuple[int, LaneSpec | None]] = []
        for lane_id in lane_ids:
            self._touch(lane_id, self.lanes.get(lane_id))
            gone.append((lane_id, self.lanes.pop(lane_id, None)))
        out: dict[int, dict[int, list[Any]]] = {}
        for lane_id, lane in gone:
            msgs = compiler.compile_lane_removal(
                lane_id,
                [d for d in self._batch_lane_dpids(lane) if d in self.connected],
                with_meter=bool(lane and lane.rate_mbps),
            )
            if lane is not None and self.topology is not None:
                addresses = self.lanes.orphaned(lane, keep)  # O(its own flows)
                for dpid, extra in sharedflows.compile_shared_removal(addresses).items():
                    if dpid in self.connected:
                        msgs.setdefault(dpid, []).extend(extra)
            out[lane_id] = msgs
        return out

    def _change_many(
        self, lanes: list[LaneSpec], removals: list[int], timeout_s: float
    ) -> tuple[dict[int, ActivationResult], str | None]:
        from viplanes.controller.runtime.lane_runtime import error_reason  # runtime imports this module

        t0 = time.perf_counter()
        if self.topology is None:
            return {ln.lane_id: ActivationResult(False, "controller has no topology", 0.0) for ln in lanes}, None
        results: dict[int, ActivationResult] = {}
        wanted = {ln.lane_id for ln in lanes}
        with self._change:
            # removals first in each switch's list: a new lane's shared flows are re-added after
            per_lane = self._removal_messages([i for i in removals if i not in wanted], lanes)
            removing = set(per_lane)
            for lane in lanes:
                try:
                    compiled = self._compile_to_send(lane)
                except Exception as exc:
                    if not isinstance(exc, ValueError):
                        LOG.exception("lane %d could not be compiled", lane.lane_id)
                    results[lane.lane_id] = ActivationResult(False, str(exc), time.perf_counter() - t0)
                    continue
                missing = [d for d in compiled if d not in self.connected]
                if missing:  # as activate: nothing sent for a lane whose path is not all there
                    results[lane.lane_id] = ActivationResult(
                        False, f"{self.switch_name(missing[0])} not connected", time.perf_counter() - t0
                    )
                else:
                    per_lane[lane.lane_id] = compiled
            per_dpid, owner = merge(per_lane, iter(self._xid, None))
            deadline = time.monotonic() + timeout_s
            answers: dict[int, SwitchAnswer] = {}
            sent: list[Batch] = []
            staged = []
            for dpid, tagged in per_dpid.items():
                ready = self._stage_tagged(dpid, tagged)
                if isinstance(ready, str):
                    answers[dpid] = SwitchAnswer(not_sent=ready)
                else:
                    staged.append(ready)
            for (dpid, _, _), batch in zip(staged, self._write_staged(staged)):
                if isinstance(batch, str):
                    answers[dpid] = SwitchAnswer(not_sent=batch)
                else:
                    sent.append(batch)
            removal_failure = None
            for batch in sent:
                confirmed = batch.wait(deadline) and not (batch.error and not batch.errors)
                if not confirmed:  # no reply, or the switch went away (disconnected sets error)
                    self.tracker.forget(batch)
                    removal_failure = removal_failure or f"{self.switch_name(batch.dpid)} did not confirm"
                # a removal's meter already gone is no failure (as LaneRuntime.deactivate)
                refused = {
                    xid: error_reason(t, c)
                    for xid, t, c in batch.errors
                    if not (owner.get(xid) in removing and t == ofp.OFPET_METER_MOD_FAILED)
                }
                answers[batch.dpid] = SwitchAnswer(confirmed=confirmed, refused=refused)
                if not confirmed or refused:
                    self.mark_suspect([batch.dpid])
                if any(owner.get(xid) in removing for xid in refused):
                    removal_failure = removal_failure or f"{self.switch_name(batch.dpid)} refused a removal"
            failures = lane_failures(
                {lid: list(d) for lid, d in per_lane.items() if lid not in removing},
                answers,
                owner,
                self.switch_name,
                timeout_s,
            )
            by_id = {ln.lane_id: ln for ln in lanes}
            for lane_id, failure in failures.items():  # carried first: a failed lane's removal
                if failure is None:  # keeps the shared flows they need
                    self.lanes[lane_id] = by_id[lane_id]
                    results[lane_id] = ActivationResult(True, "installed", time.perf_counter() - t0)
            for lane_id, failure in failures.items():
                if failure is None:
                    continue
                lane = by_id[lane_id]
                if not self.is_master and "not master" not in failure:
                    failure = f"{failure} (this controller is not master any more)"
                if lane_id not in self.lanes:  # fail closed, as activate: no half-installed lane
                    self._remove(
                        lane_id,
                        list(per_lane[lane_id]),
                        bool(lane.rate_mbps),
                        timeout_s,
                        self._orphaned_addresses(lane),
                    )
                results[lane_id] = ActivationResult(False, failure, time.perf_counter() - t0)
        return results, removal_failure

    def _batch_lane_dpids(self, lane: LaneSpec | None) -> list[int]:
        if lane is None or self.topology is None:
            return sorted(self.connected)
        try:
            return list(compiler.lane_dpids(lane, self.topology))
        except ValueError:
            return sorted(self.connected)
