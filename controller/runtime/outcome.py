"""What the switches of a batch answered, and what that means for each lane. Pure.

Split from ``batch.py`` so the rule "a lane is installed only when every switch of its path
confirmed and none refused one of its own messages" reads (and is tested) apart from the
sending and waiting; ``batch.Changes`` feeds it the answers.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.compile import ctlane
from viplanes.domain.values import ActivationResult

NO_ERRORS: Mapping[int, str] = MappingProxyType({})  # the usual ``refused``: none, not allocated
Outcome = tuple[dict[int, ActivationResult], str | None]  # per lane; why a removal failed


@dataclass(frozen=True)
class SwitchAnswer:
    """What one switch did with its part of a batch."""

    not_sent: str | None = None  # why it was not sent or lost (not connected, not master, disconnected)
    confirmed: bool = False  # its barrier reply arrived in time
    refused: Mapping[int, str] = field(default_factory=dict)  # xid -> the switch's error


CONFIRMED = SwitchAnswer(confirmed=True, refused=NO_ERRORS)  # the usual answer, shared


def both(first: SwitchAnswer, then: SwitchAnswer) -> SwitchAnswer:
    """One switch's answer to two batches of the same change: the worse of the two, every
    refusal kept (each names its lane by xid)."""
    if first == CONFIRMED:
        return then
    if then == CONFIRMED:
        return first
    return SwitchAnswer(
        not_sent=first.not_sent or then.not_sent,
        confirmed=first.confirmed and then.confirmed,
        refused={**first.refused, **then.refused},
    )


def is_group_add(msg: Any) -> bool:
    """A lane's fast-failover group ADD: one that finds the group there (a re-sent lane) is no
    failure; the next reconcile compares its buckets."""
    return isinstance(msg, parser.OFPGroupMod) and msg.command == ofp.OFPGC_ADD


def merge(
    per_lane: dict[int, dict[int, list[Any]]], xid: Callable[[], int], lenient: set[int] | None = None
) -> tuple[dict[int, list[Any]], dict[int, int]]:
    """Per-lane per-switch messages -> per-switch message lists with fresh xids, and xid ->
    lane. A message that already carries an xid (a cached one) is sent as a copy. ``lenient``
    gets the xids of new-connection meter ADDs: one that finds its meter there (a re-sent lane,
    a restarted controller) is no failure; a meter really missing fails the flows using it."""
    per_dpid: dict[int, list[Any]] = {}
    owner: dict[int, int] = {}
    for lane_id, by_dpid in per_lane.items():
        for dpid, msgs in by_dpid.items():
            out = per_dpid.setdefault(dpid, [])
            for msg in msgs:
                msg = copy.copy(msg) if msg.xid is not None else msg
                msg.xid = None
                msg.set_xid(xid())
                owner[msg.xid] = lane_id
                if lenient is not None and (ctlane.is_newconn_meter_add(msg) or is_group_add(msg)):
                    lenient.add(msg.xid)
                out.append(msg)
    return per_dpid, owner


def lane_failures(
    lane_dpids: dict[int, Iterable[int]],
    answers: dict[int, SwitchAnswer],
    owner: dict[int, int],
    name: Callable[[int], str],
    timeout_s: float,
) -> dict[int, str | None]:
    """lane id -> None (every switch of its path confirmed, none refused its messages) or the
    first reason it is not installed. Another lane's refusal on the same switch is not its own."""
    out: dict[int, str | None] = {}
    for lane_id, dpids in lane_dpids.items():
        failure = None
        for dpid in sorted(dpids):
            answer = answers.get(dpid)
            if answer is None:
                failure = f"{name(dpid)} not connected"
            elif answer.not_sent:
                failure = answer.not_sent
            elif not answer.confirmed:
                failure = f"{name(dpid)} did not confirm within {timeout_s:g} s"
            else:
                mine = next((err for xid, err in answer.refused.items() if owner.get(xid) == lane_id), None)
                failure = f"{name(dpid)} refused: {mine}" if mine else None
            if failure:
                break
        out[lane_id] = failure
    return out
