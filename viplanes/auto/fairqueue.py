"""The acceptor's queue: shared fairly between grants, and within a grant between source
prefixes, not first come first served.

Why: each source's fireflies stay inside its own rate bound, but nothing bounded them in total:
3,000 sources of one automatic grant (a v6 /64 makes that easy) filled the 256 places of a plain
FIFO, and another grant's elephant got no lane in 10 s (483 ms without the flood). Here every
grant has its own line, served round-robin, and within a grant every source prefix (/24, /64) has
its own, also round-robin. When the queue is full, a newcomer whose grant holds fewer places than
the biggest grant takes the newest place of that grant's biggest prefix; a newcomer of the
biggest grant takes the newest place of a bigger prefix of its own grant. So under contention the
places even out, and a flood waits behind itself: another grant's sighting is served after at
most one of the flood's per grant in line. (``per_grant``/``per_prefix`` cap a line even while
there is room; by default only the whole queue is bounded.)
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")
Lines = collections.OrderedDict[Hashable, collections.deque[T]]


class FairQueue(Generic[T]):
    """Bounded; ``put`` never blocks (False: no place, the caller counts it); ``get`` blocks up
    to ``timeout`` (None: nothing came). Thread-safe."""

    def __init__(self, total: int = 256, per_grant: int | None = None, per_prefix: int | None = None) -> None:
        self.total = max(1, total)
        self.per_grant = per_grant or self.total  # bounds a grant even while the queue has room
        self.per_prefix = per_prefix or self.total
        self._grants: collections.OrderedDict[Hashable, Lines[T]] = collections.OrderedDict()
        self._size = 0
        self.displaced = 0  # places taken from a bigger grant or prefix
        self._cond = threading.Condition()
        self._woken = False  # ``wake`` was called: the waiting ``get`` returns at once

    def __len__(self) -> int:
        with self._cond:
            return self._size

    def put(self, item: T, grant: Hashable, prefix: Hashable) -> bool:
        with self._cond:
            lines = self._grants.get(grant, collections.OrderedDict())
            line = lines.get(prefix, collections.deque())
            if len(line) >= self.per_prefix:
                return False
            held = sum(len(q) for q in lines.values())
            if self._size >= self.total or held >= self.per_grant:
                by_grant = self._size >= self.total and held < self.per_grant and self._displace_grant(grant, held)
                if not by_grant and not self._displace(lines, len(line)):
                    return False
            self._grants.setdefault(grant, lines).setdefault(prefix, line).append(item)
            self._size += 1
            self._cond.notify()
            return True

    def _displace(self, lines: Lines[T], mine: int) -> bool:
        """Inside a full grant: drop the newest place of its biggest prefix, if bigger than ``mine``."""
        if not lines:
            return False
        key, line = max(lines.items(), key=lambda kv: len(kv[1]))
        if len(line) <= mine + 1:  # equal after the move: no gain, only churn
            return False
        self._drop(lines, key)
        return True

    def _displace_grant(self, grant: Hashable, held: int) -> bool:
        """The whole queue is full: the biggest other grant, if bigger than ``held``, gives up the
        newest place of its biggest prefix."""
        others = [(k, ls) for k, ls in self._grants.items() if k != grant]
        if not others:
            return False
        key, lines = max(others, key=lambda kv: sum(len(q) for q in kv[1].values()))
        if sum(len(q) for q in lines.values()) <= held + 1:  # equal after the move: no gain
            return False
        biggest = max(lines, key=lambda k: len(lines[k]))
        self._drop(lines, biggest)
        if not lines:
            del self._grants[key]
        return True

    def _drop(self, lines: Lines[T], key: Hashable) -> None:
        lines[key].pop()
        if not lines[key]:
            del lines[key]
        self._size -= 1
        self.displaced += 1

    def get(self, timeout: float | None = None) -> T | None:
        """The next item round-robin: the first grant in line, its first prefix in line; both
        go to the back of their lines."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._size > 0 or self._woken, timeout) or not self._size:
                self._woken = False
                return None
            grant, lines = next(iter(self._grants.items()))
            prefix, line = next(iter(lines.items()))
            item = line.popleft()
            self._size -= 1
            if line:
                lines.move_to_end(prefix)
            else:
                del lines[prefix]
            if lines:
                self._grants.move_to_end(grant)
            else:
                del self._grants[grant]
            return item

    def get_nowait(self) -> T | None:
        return self.get(timeout=0)

    def wake(self) -> None:
        """Make a waiting ``get`` return None now (stopping)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()
