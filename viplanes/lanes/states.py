"""Where lane state changes: the lifecycle as one table, and the columns every change writes.

requested -> scheduled -> installing -> active -> expired | released | revoked, or failed; an
active lane whose every path is down is ``interrupted`` (held) until a path returns, and so is a
lane whose activation finds no usable path (it becomes ``active`` when one returns). ``TABLE``
says which state may become which and by which event; everything else is derived from it: the
``WHERE state IN (...)`` guard of every statement that moves a lane (``sources``), the columns the
move writes (``change``, ``values``) and the in-memory copy of them (``apply``). The SQL of every
dialect (viplanes/store/lanesql: Core, PostgreSQL text, SQLite's cursor) and ``records.revoke_grant``
take their states from here, so no SQL text carries a state literal of its own;
tests/unit/lanes/test_states.py checks both.

Imports nothing of ours but ``errors``: the store's statements are built from it at import time.
"""

from __future__ import annotations

from typing import Final, Protocol

from viplanes.errors import Conflict

REQUESTED: Final = "requested"
SCHEDULED: Final = "scheduled"
INSTALLING: Final = "installing"
ACTIVE: Final = "active"
INTERRUPTED: Final = "interrupted"  # carried, but no usable path left: held (docs/dataplane.md)
EXPIRED: Final = "expired"
RELEASED: Final = "released"
REVOKED: Final = "revoked"
FAILED: Final = "failed"

STATES: tuple[str, ...] = (
    REQUESTED,
    SCHEDULED,
    INSTALLING,
    ACTIVE,
    INTERRUPTED,
    EXPIRED,
    RELEASED,
    REVOKED,
    FAILED,
)
# A lane in one of these holds quota, a lane-pool address and its flows.
LIVE: tuple[str, ...] = (REQUESTED, SCHEDULED, INSTALLING, ACTIVE, INTERRUPTED)
# The data plane carries the lane, or has been asked to: its end must take flows down.
CARRIED: tuple[str, ...] = (INSTALLING, ACTIVE, INTERRUPTED)
TERMINAL: frozenset[str] = frozenset({EXPIRED, RELEASED, REVOKED, FAILED})

# The events, each named after what moves the lane.
BOOK: Final = "book"  # a request decided for later is stored
ACTIVATE: Final = "activate"  # an immediate request is stored, or ``tick`` starts a booked one
RECORD: Final = "record"  # an activation's outcome comes back from the data plane
RELEASE: Final = "release"  # its owner (or an operator) ends it
REVOKE: Final = "revoke"  # an operator ends it, or its grant is revoked
EXPIRE: Final = "expire"  # its window ended
FAIL: Final = "fail"  # it cannot start (the lane-pool is exhausted when it is due)
INTERRUPT: Final = "interrupt"  # the controller reports no usable path left for it
RESUME: Final = "resume"  # a path came back: the controller carries it again
EVENTS: tuple[str, ...] = (BOOK, ACTIVATE, RECORD, RELEASE, REVOKE, EXPIRE, FAIL, INTERRUPT, RESUME)

# (from, to) -> the event that does it. Every pair not here is forbidden. (requested, failed) and
# (active, failed) have no caller today; they were allowed before this table and stay allowed.
TABLE: dict[tuple[str, str], str] = {
    (REQUESTED, SCHEDULED): BOOK,
    (REQUESTED, INSTALLING): ACTIVATE,
    (SCHEDULED, INSTALLING): ACTIVATE,
    (INSTALLING, ACTIVE): RECORD,
    (INSTALLING, INTERRUPTED): RECORD,  # carried, but no usable path now: held from its start
    (INSTALLING, FAILED): RECORD,
    (REQUESTED, FAILED): FAIL,
    (SCHEDULED, FAILED): FAIL,
    (ACTIVE, FAILED): FAIL,
    (SCHEDULED, EXPIRED): EXPIRE,
    (INSTALLING, EXPIRED): EXPIRE,
    (ACTIVE, EXPIRED): EXPIRE,
    (ACTIVE, INTERRUPTED): INTERRUPT,
    (INTERRUPTED, ACTIVE): RESUME,
    (INTERRUPTED, EXPIRED): EXPIRE,
    **{(state, RELEASED): RELEASE for state in LIVE},
    **{(state, REVOKED): REVOKE for state in LIVE},
}

# src -> the states it may become (the table's rows, for readers and ``can_move``)
TRANSITIONS: dict[str, frozenset[str]] = {src: frozenset(dst for (s, dst) in TABLE if s == src) for src in STATES}
# the audit action of a lane ended by a caller (``LaneManager.end``, both of its paths)
END_ACTIONS: dict[str, str] = {RELEASED: "lane.release", REVOKED: "lane.revoke"}


def _ordered(states: set[str]) -> tuple[str, ...]:
    return tuple(state for state in STATES if state in states)


def can_move(src: str, dst: str) -> bool:
    return (src, dst) in TABLE


def event_of(src: str, dst: str) -> str | None:
    """The event that moves a lane from ``src`` to ``dst``, or None when the table forbids it."""
    return TABLE.get((src, dst))


def sources(*events: str) -> tuple[str, ...]:
    """The states ``events`` move a lane out of, in lifecycle order: the ``WHERE state IN (...)``
    guard of a statement that does them, so a lane moved meanwhile is left alone."""
    return _ordered({src for (src, _), event in TABLE.items() if event in events})


def targets(*events: str) -> tuple[str, ...]:
    """The states ``events`` move a lane into, in lifecycle order."""
    return _ordered({dst for (_, dst), event in TABLE.items() if event in events})


# The guards of the statements that move lanes, derived once (lanesql builds its SQL from them).
RECORD_FROM = sources(RECORD)  # an activation's outcome is written only over ``installing``
END_FROM = sources(RELEASE, REVOKE)  # a caller's end, a grant's revoke


def values(to: str, reason: str | None = None, at: float | None = None) -> dict[str, object]:
    """The columns a move into ``to`` writes: ``activated_at`` for active, ``reason`` and
    ``ended_at`` for an end. Which states it may come from is its statement's guard."""
    if to not in STATES or to == REQUESTED:
        raise ValueError(f"no move into {to!r}")
    out: dict[str, object] = {"state": to}
    if to == ACTIVE:
        out["activated_at"] = at
    if reason is not None:
        out["reason"] = reason
    if to in TERMINAL:
        if reason is None or at is None:
            raise ValueError(f"a move into {to} says why and when")
        out["ended_at"] = at
    return out


def change(src: str, dst: str, reason: str | None = None, at: float | None = None) -> dict[str, object]:
    """The columns a lane in ``src`` writes to become ``dst``; Conflict if the table forbids it."""
    if not can_move(src, dst):
        raise Conflict(f"lane is {src}; cannot become {dst}", code="bad_transition")
    return values(dst, reason, at)


def ending(to: str, reason: str, at: float) -> dict[str, object]:
    """A caller's end (release or revoke): its columns, written over ``END_FROM``."""
    if to not in END_ACTIONS:
        raise ValueError(f"a caller ends a lane as released or revoked, not {to!r}")
    return values(to, reason, at)


class _Lane(Protocol):
    id: int
    state: str


def apply(lane: object, written: dict[str, object]) -> None:
    """Mirror columns a statement wrote (``values``/``change``) onto a lane object: the answer a
    caller gets, or an ORM row the session flushes."""
    for key, value in written.items():
        setattr(lane, key, value)


def move(lane: _Lane, dst: str, reason: str | None = None, at: float | None = None) -> dict[str, object]:
    """Move a lane object (an ORM row its session flushes, or the copy a statement's answer is
    built from) if the table allows it; Conflict otherwise. Returns the columns it set."""
    if not can_move(lane.state, dst):
        raise Conflict(f"lane {lane.id} is {lane.state}; cannot become {dst}", code="bad_transition")
    written = values(dst, reason, at)
    apply(lane, written)
    return written
