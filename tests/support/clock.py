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


class SteppedHost:
    """A machine's two clocks for step tests: real time passes for both, a step (``date -s``, an
    NTP step) moves only the wall clock. ``true`` is real time: what a switch's relative hard
    timeout counts (hand it to ``FakeSwitches``)."""

    def __init__(self, now: float = T0) -> None:
        self.true = FakeClock(now)
        self._start = now
        self.offset = 0.0  # the sum of the steps

    def wall(self) -> float:
        return self.true.now + self.offset

    def monotonic(self) -> float:
        return 1000.0 + (self.true.now - self._start)  # an arbitrary zero, like the kernel's

    def elapse(self, seconds: float) -> None:
        self.true.advance(seconds)

    def step(self, seconds: float) -> None:
        self.offset += seconds
