"""A change on its way: what ``Changes`` sent and how each switch answered it.

``Changes._send`` builds an ``InFlight``; ``collect`` waits for its barriers and turns each
switch's barrier, errors and loss into one ``SwitchAnswer`` (two batches to one switch, a NAT
takeover's, answer as the worse of the two: ``outcome.both``), which ``outcome.lane_failures``
then judges lane by lane. Kept apart from ``batch`` so the path that sends stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp

from viplanes.controller.runtime.outcome import CONFIRMED, NO_ERRORS, SwitchAnswer, both
from viplanes.controller.runtime.pending import Batch
from viplanes.controller.runtime.switches import SwitchState
from viplanes.controller.runtime.wire import error_reason
from viplanes.domain.values import ActivationResult


def lenient_error(err_type: int, code: int) -> bool:
    """A meter already there (or gone), a group already there: no failure for a re-sent lane."""
    return err_type == ofp.OFPET_METER_MOD_FAILED or (
        err_type == ofp.OFPET_GROUP_MOD_FAILED and code == ofp.OFPGMFC_GROUP_EXISTS
    )


@dataclass
class InFlight:
    """A change sent and not yet judged (``Changes._send`` -> ``Changes._finish``)."""

    per_lane: dict[int, dict[int, list[Any]]]  # lane id -> dpid -> its messages
    removing: set[int]  # lane ids of the removals among them
    owner: dict[int, int]  # xid -> lane id
    sent: list[Batch]  # the barriers to wait for
    answers: dict[int, SwitchAnswer]  # dpid -> why it was not sent, so far
    results: dict[int, ActivationResult]  # lanes already judged (not compiled, switch away)
    deadline: float  # time.monotonic()
    lenient: frozenset[int] = frozenset()  # xids whose meter errors are no failure (``merge``)
    held: dict[int, str] = field(default_factory=dict)  # lane id -> why it is held (no usable path)
    diversions: dict[int, dict[int, list[Any]]] = field(default_factory=dict)  # lane id -> its last step


def collect(state: SwitchState, batches: list[Batch], flight: InFlight) -> str | None:
    """Wait for ``batches``' barriers and record each switch's answer in ``flight.answers``
    (combined with an earlier answer of the same switch); why a removal failed, or None."""
    owner, answers = flight.owner, flight.answers
    removal_failure = None
    for batch in batches:
        confirmed = batch.wait(flight.deadline) and batch.lost is None
        if not confirmed:  # no reply in time, or the switch went away
            state.tracker.forget(batch)
            removal_failure = removal_failure or f"{state.switch_name(batch.dpid)} did not confirm"
        # a removal's meter already gone is no failure
        refused = (
            {
                xid: error_reason(t, c, state.short_name(batch.dpid))
                for xid, t, c in batch.errors
                if not ((owner.get(xid) in flight.removing or xid in flight.lenient) and lenient_error(t, c))
            }
            if batch.errors
            else NO_ERRORS
        )
        if batch.lost is not None:
            answer = SwitchAnswer(not_sent=batch.lost)
        else:
            answer = CONFIRMED if confirmed and not refused else SwitchAnswer(confirmed=confirmed, refused=refused)
        earlier = answers.get(batch.dpid)
        answers[batch.dpid] = answer if earlier is None else both(earlier, answer)
        if not confirmed or refused:
            state.mark_suspect([batch.dpid])
        if refused and any(owner.get(xid) in flight.removing for xid in refused):
            removal_failure = removal_failure or f"{state.switch_name(batch.dpid)} refused a removal"
    return removal_failure
