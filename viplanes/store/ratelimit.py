"""Failed-authentication limiting: slows a token guesser, never refuses a valid token.

Only requests whose token is missing or wrong are counted and refused (429 with Retry-After);
a request with a valid token is always served, so one careless local user hammering the API
cannot lock every operator out (the API listens on 127.0.0.1: they share one address).

Counts live in the database (table ``auth_failures``: scope, fixed window, count) so every API
process on one database shares one budget and a restart does not reset it. Three scopes, each
with its own budget per window, so rotating source addresses does not help much:

    addr:<ip>          one client address               (VIPLANES_AUTH_MAX_FAILURES, default 10)
    net:<ip>/24|/64    its IPv4 /24 or IPv6 /64          (VIPLANES_AUTH_NET_MAX_FAILURES, default 50)
    all                every failure                     (VIPLANES_AUTH_GLOBAL_MAX_FAILURES, default 500)

Window: VIPLANES_AUTH_WINDOW_S (default 60 s). Windows are fixed (aligned to multiples of the
window), so a guesser gets at most twice a budget across a window boundary. A scope over budget
is remembered in memory until its window ends, so a flood of bad tokens costs no database writes
after the budget is spent; old windows are pruned now and then. The token lookup itself stays
one indexed query (tokens are 256-bit random: the limit is about load, not about guessing odds).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Budgets:
    per_address: int = 10
    per_network: int = 50
    overall: int = 500
    window_s: int = 60


def scopes_of(client: str) -> list[str]:
    """The scopes one failure from ``client`` counts against."""
    try:
        addr = ipaddress.ip_address(client)
    except ValueError:
        return [f"addr:{client[:58]}", "all"]
    prefix = 24 if addr.version == 4 else 64
    net = ipaddress.ip_network(f"{addr}/{prefix}", strict=False)
    return [f"addr:{addr}", f"net:{net}", "all"]


class FailedAuthLimiter:
    """Shared, database-backed failure counts with an in-memory "blocked until" cache."""

    def __init__(self, db: Any, budgets: Budgets | None = None, clock: Callable[[], float] | None = None) -> None:
        self.db = db
        self.budgets = budgets or Budgets()
        self._clock = clock or time.time
        self._blocked: dict[str, float] = {}  # scope -> end of the window it is over budget in
        self._lock = threading.Lock()
        self._last_prune = 0.0

    def _limit(self, scope: str) -> int:
        b = self.budgets
        return b.overall if scope == "all" else b.per_network if scope.startswith("net:") else b.per_address

    def _window(self, now: float) -> int:
        w = self.budgets.window_s
        return int(now // w) * w

    def retry_after(self, client: str) -> float:
        """Seconds until a failing ``client`` may try again (0: not limited). Cache, then database."""
        now = self._clock()
        scopes = scopes_of(client)
        with self._lock:
            wait = max((self._blocked.get(sc, 0.0) - now for sc in scopes), default=0.0)
        if wait > 0:
            return wait
        from viplanes.store.models import AuthFailureCount as Row

        window = self._window(now)
        try:
            with self.db.read() as s:
                counts = dict(
                    s.execute(
                        select(Row.scope, Row.count).where(Row.scope.in_(scopes), Row.window_start == window)
                    ).all()
                )
        except SQLAlchemyError:
            log.warning("auth-failure counts unavailable; not limiting", exc_info=True)
            return 0.0
        return self._note_over(counts, window, now)

    def _note_over(self, counts: dict[str, int], window: int, now: float) -> float:
        ends = window + self.budgets.window_s
        over = [sc for sc, n in counts.items() if n >= self._limit(sc)]
        if not over:
            return 0.0
        with self._lock:
            if len(self._blocked) > 10_000:
                self._blocked = {k: v for k, v in self._blocked.items() if v > now}
            for sc in over:
                self._blocked[sc] = ends
        return ends - now

    def record_failure(self, client: str) -> None:
        """Count one failure in every scope of ``client`` (one short write transaction)."""
        from viplanes.store.models import AuthFailureCount as Row

        now = self._clock()
        window = self._window(now)
        scopes = scopes_of(client)
        try:
            with self.db.write() as s:
                counts = {sc: _increment(s, Row, sc, window) for sc in scopes}
                if now - self._last_prune > self.budgets.window_s:
                    self._last_prune = now
                    s.execute(delete(Row).where(Row.window_start < window - self.budgets.window_s))
        except SQLAlchemyError:
            log.warning("could not record a failed authentication", exc_info=True)
            return
        self._note_over(counts, window, now)


def _increment(s: Any, row: Any, scope: str, window: int) -> int:
    """count += 1 for (scope, window), creating the row; returns the new count. An upsert both
    SQLite (>= 3.24) and PostgreSQL understand."""
    from sqlalchemy.dialects import postgresql, sqlite

    insert = postgresql.insert if s.get_bind().dialect.name == "postgresql" else sqlite.insert
    stmt: Any = insert(row).values(scope=scope, window_start=window, count=1)
    stmt = stmt.on_conflict_do_update(
        index_elements=["scope", "window_start"], set_={"count": row.count + 1}
    ).returning(row.count)
    return int(s.execute(stmt).scalar_one())
