"""A clock for lane windows that a wall-clock step cannot move: unix seconds read once at start,
then advanced by the monotonic clock.

``time.time()`` follows every step of the system clock (``date -s``, an NTP step, a VM restored
from a snapshot): a +1 h step expired every lane shorter than an hour at the next tick, a -1 h step
kept lanes (and their re-installed flows) an hour past their end. ``CLOCK_MONOTONIC`` never steps;
NTP's slewing changes its rate and the wall clock's alike, so the two stay together except across a
step. The switches' ``hard_timeout`` is relative and runs on their own monotonic clock too, so a
controller that reads this clock agrees with them about when a lane's flows go.

What it cannot fix: a process started while the wall clock is wrong keeps that error for its whole
life (start after time synchronisation; ``viplanes.cluster.clockcheck`` refuses a controller whose
clock disagrees with the database's). A step is logged once, with its size, and kept visible in
``wall_offset`` (docs/architecture.md, "Time").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

STEP_REPORT_S = 1.0  # a wall clock this far from the steady one is a step worth a log line
CHECK_EVERY_S = 1.0  # how often a call also reads the wall clock to look for a step


class SteadyClock:
    """Callable like ``time.time`` (unix seconds), but ``wall_at_start + (monotonic() - mono_at_start)``."""

    def __init__(
        self,
        wall: Callable[[], float] | None = None,
        monotonic: Callable[[], float] | None = None,
        report_s: float = STEP_REPORT_S,
    ) -> None:
        self._wall = wall or time.time  # looked up here, not at import: tests patch ``time``
        self._monotonic = monotonic or time.monotonic
        self._mono0 = self._monotonic()
        self._wall0 = self._wall()
        self._report_s = report_s
        self._reported = 0.0  # the wall offset last logged
        self._next_check = self._mono0 + CHECK_EVERY_S

    def __call__(self) -> float:
        mono = self._monotonic()
        if mono >= self._next_check:
            self._next_check = mono + CHECK_EVERY_S
            self._report(self._wall() - (self._wall0 + (mono - self._mono0)))
        return self._wall0 + (mono - self._mono0)

    def wall_offset(self) -> float:
        """Seconds the wall clock has moved away from this one since start (the sum of its steps)."""
        mono = self._monotonic()
        return self._wall() - (self._wall0 + (mono - self._mono0))

    def _report(self, offset: float) -> None:
        if abs(offset - self._reported) < self._report_s:
            return
        log.warning(
            "the wall clock stepped %+.1f s (now %+.1f s from the clock lane windows use); lanes keep "
            "their real length; restart the process to adopt the wall clock",
            offset - self._reported,
            offset,
        )
        self._reported = offset
