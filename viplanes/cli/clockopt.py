"""``--max-clock-skew`` for the commands of the split deployment (``controller cluster``, ``api``).

Each of those processes anchors its lane clock once at start (viplanes/domain/clock.py); one that
starts on a clock far from the database's would judge every lane on the wrong time for its whole
life, so it refuses to start: one line, exit code ``CLOCK_SKEW_EXIT``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:  # the command modules stay light until a command runs
    from viplanes.store.db import Database

CLOCK_SKEW_EXIT = 3  # 1 is every other start-up error (a bad URL, a busy port)

F = TypeVar("F", bound=Callable[..., Any])


class ClockSkewExit(click.ClickException):
    """One line, and an exit code a supervisor can tell from a bad URL or a busy port."""

    exit_code = CLOCK_SKEW_EXIT


def max_clock_skew_option(fn: F) -> F:
    return click.option(
        "--max-clock-skew",
        "max_skew_s",
        type=click.FloatRange(0, 3600),
        default=5.0,
        show_default=True,
        help="refuse to start when this clock and the database's differ by more, seconds (0: no check)",
    )(fn)


def refuse_skewed_clock(db: Database, max_skew_s: float) -> None:
    """``ClockSkewExit`` when this machine's clock and the database's disagree past the limit."""
    from viplanes.cluster.clockcheck import ClockSkewError, check_clock

    try:
        check_clock(db, max_skew_s)
    except ClockSkewError as exc:
        raise ClockSkewExit(str(exc)) from None
