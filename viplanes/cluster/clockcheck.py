"""A controller of the split deployment starts only if its clock agrees with the database's.

Every process anchors its lane clock once, at start (``viplanes.domain.clock.SteadyClock``): the
API processes write a lane's window with theirs, the master ends it with its own. Two processes
that started on clocks far apart would disagree about every lane for their whole lives, and a
master started on a clock an hour behind would keep every lane an hour too long. The database is
the one clock they all reach, so each controller compares its wall clock with the database's
``clock_timestamp()`` at start and refuses to run past ``max_skew_s`` (the CLI's
``--max-clock-skew``). The round trip is measured and the midpoint used, so a slow answer does not
pass for skew.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import text

from viplanes.cluster.leader import now_sql
from viplanes.errors import VipError
from viplanes.store.db import Database

MAX_SKEW_S = 5.0  # the default: well above NTP's milliseconds, well below any lane's length


class ClockSkewError(VipError):
    """The local clock and the database's disagree by more than the limit."""


def clock_skew(db: Database, wall: Callable[[], float] | None = None) -> tuple[float, float]:
    """(database clock minus local clock, round trip) in seconds: one query."""
    wall = wall or time.time
    with db.read_connection() as conn:
        before = wall()
        db_now = float(conn.execute(text(f"SELECT {now_sql(db)}")).scalar_one())
        after = wall()
    return db_now - (before + after) / 2.0, after - before


def check_clock(db: Database, max_skew_s: float = MAX_SKEW_S, wall: Callable[[], float] | None = None) -> float:
    """The skew if within ``max_skew_s`` (0 turns the check off); else ``ClockSkewError``."""
    if max_skew_s <= 0:
        return 0.0
    skew, rtt = clock_skew(db, wall)
    if abs(skew) > max_skew_s + rtt / 2.0:
        raise ClockSkewError(
            f"this machine's clock is {abs(skew):.1f} s {'behind' if skew > 0 else 'ahead of'} the database's "
            f"(limit {max_skew_s:g} s): synchronise both clocks (NTP) before starting a controller"
        )
    return skew
