"""Token-hash -> caller, remembered for a few seconds: authentication without a query.

Every authenticated HTTP request used to open a read transaction only to map its bearer token to
a principal (docs/benchmarks.md). This cache answers repeat requests from memory.

Security rules:
- Only successful lookups are cached (an unknown or disabled token always goes to the database).
- Anything that can make a token stop working (rotating it, disabling the principal) calls
  :meth:`TokenCache.invalidate` both when it changes the row and again after its transaction
  commits. Invalidation empties the whole cache and bumps a generation counter; a lookup that
  started before an invalidation never stores its (possibly stale) answer. So in *this* process a
  rotated or disabled token fails on the first request after the rotate/disable response.
- Multi-process caveat: another process writing to the same database (a second ``viplanes serve``
  on one PostgreSQL, a script using ``viplanes.store.records`` directly) cannot reach this cache, so here
  the old token keeps working for at most ``ttl_s`` (5 s) after such a change. Run one serve
  process per database, or set ``VIPLANES_TOKEN_CACHE_TTL=0`` to turn the cache off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from viplanes.settings import DEFAULTS

from .tokens import Caller, hash_token

DEFAULT_TTL_S = DEFAULTS.number("VIPLANES_TOKEN_CACHE_TTL")
MAX_ENTRIES = 10_000  # a flood of distinct valid tokens cannot grow memory without bound


class TokenCache:
    """Thread-safe; keyed by (database URL, token hash) so the plain token is never kept."""

    def __init__(self, ttl_s: float = DEFAULT_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], tuple[float, Caller]] = {}
        self._generation = 0

    def lookup(self, db_key: str, token: str, load: Callable[[], Caller | None]) -> Caller | None:
        """The cached caller for ``token``, else ``load()`` (which queries the database)."""
        if self.ttl_s <= 0:
            return load()
        key = (db_key, hash_token(token))
        now = self.clock()
        with self._lock:
            hit = self._entries.get(key)
            generation = self._generation
        if hit is not None and now < hit[0]:
            return hit[1]
        caller = load()
        with self._lock:
            if caller is None:
                self._entries.pop(key, None)
            elif generation == self._generation:  # nothing was invalidated while we queried
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (now + self.ttl_s, caller)
        return caller

    def invalidate(self) -> None:
        """Forget every cached caller; lookups already under way will not store their answer."""
        with self._lock:
            self._entries.clear()
            self._generation += 1

    def invalidate_with(self, s: Session) -> None:
        """Invalidate now and once more after ``s`` commits (requests that read the old row
        while the change was uncommitted must not keep it)."""
        self.invalidate()
        event.listen(s, "after_commit", self._after_commit, once=True)

    def _after_commit(self, _session: Any) -> None:
        self.invalidate()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


# One per process: invalidation must reach every app/database object that may have cached a token.
TOKENS = TokenCache()  # its ttl_s set from the process's settings by create_app
