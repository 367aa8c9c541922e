"""What a master may do when woken: read the committed rows, never obey the payload (issue 28).

PostgreSQL checks no privilege for ``NOTIFY`` (nor for ``pg_notify``): a role that can log in
and holds no table privilege at all can send ``ended:1`` on ``viplanes_lanes``. So a payload is
a wake-up with a hint: its lane ids say which rows to read first, and only a committed row in a
state that no longer carries the lane takes its flows off the switches. A forged or unknown id
reads a row that says "live" (or no row for a lane we do not carry) and changes nothing.

The same rule repairs: ``missing_live`` finds the lanes the database holds ``active`` that the
runtime does not carry (dropped from memory by any path), so the master's sweep sends them again.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import select

from viplanes.domain.values import is_decimal
from viplanes.lanes import states
from viplanes.store.db import Database
from viplanes.store.models import Lane

CARRIED_STATES = states.CARRIED  # as ``LaneManager.desired_lanes``: the rows to carry


def payload_ids(payloads: Iterable[str], prefix: str) -> set[int]:
    """Lane ids of the payloads that start with ``prefix`` (``"lane:"``, ``"ended:"``); junk skipped."""
    cut = len(prefix)
    return {int(p[cut:]) for p in payloads if p.startswith(prefix) and is_decimal(p[cut:])}


def not_carried(db: Database, lane_ids: Collection[int], now: float) -> set[int]:
    """Those of ``lane_ids`` whose committed row no longer asks to be carried (ended, expired,
    failed, gone): the only lanes a wake-up may take off the switches. One indexed read."""
    if not lane_ids:
        return set()
    with db.read() as s:
        live = set(
            s.scalars(
                select(Lane.id).where(
                    Lane.id.in_(list(lane_ids)), Lane.state.in_(CARRIED_STATES), Lane.expires_at > now
                )
            )
        )
    return set(lane_ids) - live


def missing_live(db: Database, lane_ids: Collection[int]) -> set[int]:
    """Those of ``lane_ids`` (desired, not carried) whose committed row is ``active``: lanes the
    runtime lost. ``installing`` ones are left to the lane manager's ``recover``, which records
    their outcome."""
    if not lane_ids:
        return set()
    with db.read() as s:
        return set(
            s.scalars(
                select(Lane.id).where(Lane.id.in_(list(lane_ids)), Lane.state.in_((states.ACTIVE, states.INTERRUPTED)))
            )
        )
