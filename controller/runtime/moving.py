"""Move the carried lanes onto a new topology view (issue 42): the runtime's half of a re-route.

Only the lanes whose path differs between the two views are compiled again (the path is a
function of the lane's source host, so it is compared once per source, not per lane); every
other lane keeps its compiled messages. What the moving lanes had (their messages over the old
view, as the switches hold them) and what they need (over the new one) give the three rounds of
``compile.moves``: no switch is read back, each round is one write and one barrier per switch,
all switches at once.

Holds ``state.change`` from the swap of the view to the last barrier, as an activation does, so
no activation or release interleaves; the moving lanes are *touched*, so a reconcile that read
the switches before leaves them alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from viplanes.controller.compile.desired import DesiredFlows
from viplanes.controller.compile.moves import Moves, plan_moves
from viplanes.controller.compile.repath import Repath
from viplanes.controller.runtime import heap
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import Wire, meter_errors_only
from viplanes.domain.values import LaneSpec
from viplanes.topologies.model import Topology

OFMsgs = list[Any]


@dataclass(frozen=True)
class Moved:
    """What one move did: lanes moved, messages sent, where the time went, the first failure."""

    lanes: int
    derived: int  # of them, rules derived from the old path's (``repath``), not compiled
    messages: int
    dpids: tuple[int, ...]  # switches that were sent anything
    compile_s: float
    send_s: float
    rounds_s: tuple[float, ...]  # each round: sent, and every barrier of it answered
    cpu_s: float  # this thread's CPU for all of it (the machine may be busy with others)
    failure: str | None


def _collect(
    flows: DesiredFlows, lanes: Iterable[LaneSpec], messages: Callable[[LaneSpec], dict[int, OFMsgs] | None]
) -> tuple[dict[int, OFMsgs], dict[LaneSpec, dict[int, OFMsgs]]]:
    """Per dpid, these lanes' ``messages`` and their shared flows over ``flows``'s view; and
    each lane's own."""
    out: dict[int, OFMsgs] = {}
    per_lane: dict[LaneSpec, dict[int, OFMsgs]] = {}
    for lane in lanes:
        per_dpid = messages(lane)
        if per_dpid is None:
            continue
        per_lane[lane] = per_dpid
        for dpid, msgs in per_dpid.items():
            out.setdefault(dpid, []).extend(msgs)
    for dpid, msgs in flows.shared(list(per_lane)).items():
        out.setdefault(dpid, []).extend(msgs)
    return out, per_lane


def split_moving(
    old: DesiredFlows, new: DesiredFlows, lanes: Iterable[LaneSpec]
) -> tuple[list[LaneSpec], list[LaneSpec]]:
    """(lanes whose path differs between the views, lanes whose path is the same), the path
    computed once per source."""
    same: dict[str, bool] = {}
    moving: list[LaneSpec] = []
    staying: list[LaneSpec] = []
    for lane in lanes:
        kept = same.get(lane.src_ip)
        if kept is None:
            kept = same[lane.src_ip] = old.path_of(lane) == new.path_of(lane)
        (staying if kept else moving).append(lane)
    return moving, staying


def _repath(old: DesiredFlows, new: DesiredFlows, moving: list[LaneSpec], now: float) -> int:
    """Put the moving lanes' new messages into ``new``, derived from their old ones where
    ``repath`` may (the first lane of each kind is compiled and checked); lanes derived."""
    repath = Repath(lambda lane: new.lane(lane, now))
    paths: dict[str, tuple[Any, Any]] = {}
    for lane in moving:
        hops = paths.get(lane.src_ip)
        if hops is None:
            hops = paths[lane.src_ip] = (old.path_of(lane), new.path_of(lane))
        if new.compiled(lane):
            continue
        msgs = repath.messages(lane, old.peek(lane), *hops)
        if msgs is not None and not new.compiled(lane):
            new.put(lane, msgs)
    return repath.derived


def move_lanes(state: SwitchState, wire: Wire, view: Topology, timeout_s: float = 5.0) -> Moved:
    """Swap the runtime's view for ``view`` and move the carried lanes onto it."""
    t0, cpu = time.perf_counter(), time.thread_time()
    with state.change, heap.gc_held():  # thousands of young messages: no collections meanwhile
        old = state.flows
        new = DesiredFlows(view)
        now = state.clock()
        lanes = list(state.lanes.values())
        with state.compile_lock:
            moving, staying = split_moving(old, new, lanes) if old is not None else (lanes, [])
            if old is not None:
                new.adopt(old, staying)
            # the old messages as sent (their timeouts are the switch's business now); the new
            # ones timed from now
            before, _ = _collect(old, moving, lambda ln: old.peek(ln) or old.lane(ln, now)) if old else ({}, {})
            derived = _repath(old, new, moving, now) if old is not None else 0
            after, per_lane = _collect(new, moving, lambda ln: new.lane(ln, now))
            state.topology = view
            state.lanes.set_view(view)  # their shared flows follow the paths too
            state.flows = new
            state.generation += 1  # reads of the desired lanes before this are stale
        for lane in moving:
            state.touch(lane.lane_id, lane)
        for lane, per_dpid in per_lane.items():
            state.note_lane_flows(lane, per_dpid)
        state.note_changed(None)
        moves: Moves = plan_moves(before, after)
        t1 = time.perf_counter()
        failure = None
        rounds: list[float] = []
        if state.may_write():
            for rnd in moves.rounds():
                if rnd is moves.drop:  # a switch away (the one that failed?) is reconciled on return
                    rnd = {d: msgs for d, msgs in rnd.items() if d in state.connected}
                t = time.perf_counter()
                failure = wire.apply(rnd, timeout_s, tolerate=meter_errors_only) if rnd else None
                rounds.append(time.perf_counter() - t)
                if failure:
                    break
        dpids = tuple(sorted({d for rnd in moves.rounds() for d in rnd}))
    return Moved(
        len(moving),
        derived,
        moves.count(),
        dpids,
        t1 - t0,
        time.perf_counter() - t1,
        tuple(rounds),
        time.thread_time() - cpu,
        failure,
    )
