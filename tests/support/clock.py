"""The one fake clock: tests move time by hand, and code under test reads it like ``time.time``."""

from __future__ import annotations

T0 = 1_800_000_000.0  # a fixed "now": 2027-01-15


class FakeClock:
    """Callable like ``time.time``; a test sets ``now`` or calls ``advance``."""

    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
