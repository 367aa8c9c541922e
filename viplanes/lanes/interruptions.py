"""The lane service's half of link failover: a lane the controller holds for want of a usable
path becomes ``interrupted`` (its reason names the links), and ``active`` again once the
controller carries it on a path. A lane held from its activation on was recorded
``interrupted`` by the activation itself (``outcomes``); it is resumed here like any other. The scheduler's thread runs it after each tick; moves go
through the state table (``states.move``) under the row lock, each with its audit event, so this
is the one writer of these two moves; in a controller cluster only the lease holder writes them
(the fence). Within one tick (0.5 s by default) of the controller's view.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.orm import Session

from viplanes.dataplane.base import Dataplane
from viplanes.lanes import states
from viplanes.store.db import Database
from viplanes.store.models import Lane
from viplanes.store.records import audit

RESUMED = "a usable path is back: carried again"
MAX_REASON = 500


Fence = Callable[[Session], bool]  # inside the write transaction: may this process write lane state?


def sync_interruptions(
    db: Database, dataplane: Dataplane, clock: Callable[[], float], fence: Fence | None = None
) -> dict[str, int]:
    """Move lanes between ``active`` and ``interrupted`` as the controller reports them.
    ``fence`` (a controller cluster: ``LeaderLease.holds``): checked in the write transaction,
    so only the lease holder writes; a standby's (or a just-deposed master's) view of the
    links is its own and writes nothing."""
    held = dataplane.interrupted()
    with db.read() as s:
        now_interrupted = set(s.scalars(select(Lane.id).where(Lane.state == states.INTERRUPTED)))
        if held:
            active_held = set(s.scalars(select(Lane.id).where(Lane.id.in_(list(held)), Lane.state == states.ACTIVE)))
        else:
            active_held = set()
    resume = now_interrupted - set(held)
    if not active_held and not resume:
        return {"interrupted": 0, "resumed": 0}
    now = clock()
    moved = {"interrupted": 0, "resumed": 0}
    with db.write() as s:
        if fence is not None and not fence(s):
            return {"interrupted": 0, "resumed": 0}
        rows = s.scalars(select(Lane).where(Lane.id.in_(sorted(active_held | resume))).with_for_update(of=Lane)).all()
        for lane in rows:
            if lane.id in active_held and lane.state == states.ACTIVE:
                states.move(lane, states.INTERRUPTED, held[lane.id][:MAX_REASON])
                audit(s, now, "system", "lane.interrupt", f"lane:{lane.id}", "done", lane.reason)
                moved["interrupted"] += 1
            elif lane.id in resume and lane.state == states.INTERRUPTED:
                # keeps its first start; a lane held from its activation on starts now
                states.move(lane, states.ACTIVE, RESUMED, at=lane.activated_at or now)
                audit(s, now, "system", "lane.resume", f"lane:{lane.id}", "done", RESUMED)
                moved["resumed"] += 1
    return moved
