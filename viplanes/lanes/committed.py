"""A lane request's answer after a database error, told truthfully.

Once the transaction that inserts a lane has committed, the lane exists: answering 503 "try
again" then (a full disk refusing the next write, the connection lost while COMMIT was on its
way) made a client without an Idempotency-Key ask again and get a second lane. So:

- an error raised by the insert's own transaction is checked against the database: if the row is
  there after all (the COMMIT reached the server), the request goes on as granted;
- an error recording the activation (the data plane answered, the write of its outcome failed)
  answers the lane as the database holds it (``installing``; ``recover`` finishes it), not 503.

Only when the database cannot tell (it cannot be read either) does the 503 stand: then nothing
the client can see was promised.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from viplanes.store.db import Database
from viplanes.store.models import Lane

log = logging.getLogger(__name__)


def _stored(db: Database, lane: Lane) -> Lane | None:
    """The lane's row as committed (the same principal and creation time), or None."""
    with db.read() as s:
        return s.scalar(
            select(Lane).where(
                Lane.id == lane.id, Lane.principal_id == lane.principal_id, Lane.created_at == lane.created_at
            )
        )


def committed_after_all(db: Database, lane: Lane, exc: BaseException) -> bool:
    """True when ``exc`` broke the insert's transaction but the lane row is committed anyway."""
    if not isinstance(exc, DBAPIError):
        return False
    try:
        found = _stored(db, lane) is not None
    except DBAPIError:
        return False  # the database cannot tell: the 503 stands
    if found:
        log.error("lane %d committed although its transaction raised: %s", lane.id, str(exc).splitlines()[0])
    return found


def activate_truthfully(activate: Callable[[Lane], Lane], db: Database, lane: Lane) -> Lane:
    """``activate(lane)``; when recording its outcome fails in the database, the lane as stored."""
    try:
        return activate(lane)
    except DBAPIError as exc:
        try:
            stored = _stored(db, lane)
        except DBAPIError:
            raise exc from None
        if stored is None:
            raise
        log.error(
            "lane %d granted; its activation could not be recorded (%s): answered %s, recover finishes it",
            lane.id,
            str(exc).splitlines()[0],
            stored.state,
        )
        return stored
