"""Sending to switches and waiting for their answers: barriers and stats requests.

Every write to a switch is a *batch*: its ofmsgs with fresh xids, then one barrier, expected by
the tracker before anything is written (a reply may come at once). A batch is confirmed when the
barrier reply arrives; errors name the xid of the message that failed. ``Wire`` writes through
``state.send`` (one switch) or ``state.send_many`` (several switches serialised first, then
written back to back). It takes no lock of its own: callers hold ``state.change`` for writes.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_3 as ofp
from os_ken.ofproto import ofproto_v1_3_parser as parser

from viplanes.controller.runtime.pending import Batch
from viplanes.controller.runtime.switches import SwitchState

Staged = tuple[int, list[Any], Batch]  # (dpid, ofmsgs + barrier, the batch the tracker expects)
Tolerate = Callable[[Batch], bool]  # True: this batch's errors are no failure


def never(batch: Batch) -> bool:
    return False


def meter_errors_only(batch: Batch) -> bool:
    """Meter adds/deletes that find the meter already there (or gone) are not failures, nor a
    group add that finds its group there (a reconcile planned while an activation added it)."""
    return all(
        t == ofp.OFPET_METER_MOD_FAILED or (t == ofp.OFPET_GROUP_MOD_FAILED and c == ofp.OFPGMFC_GROUP_EXISTS)
        for _, t, c in batch.errors
    )


# An OpenFlow error in an operator's words: what the switch lacks, and what to do (docs/hardware.md).
# Keyed by (type, code); the code's own name follows the words so it can be looked up.
_WORDS: dict[tuple[int, int], tuple[str, str]] = {
    (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_TABLE_FULL): ("flow table is full", "OFPFMFC_TABLE_FULL"),
    (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID): (
        "pipeline has no such table (a single-table switch?)",
        "OFPFMFC_BAD_TABLE_ID",
    ),
    (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM): ("configuration forbids this flow", "OFPFMFC_EPERM"),
    (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_OUT_OF_METERS): ("meter table is full", "OFPMMFC_OUT_OF_METERS"),
    (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_INVALID_METER): ("meters cannot take this meter", "OFPMMFC_INVALID_METER"),
    (ofp.OFPET_METER_MOD_FAILED, ofp.OFPMMFC_OUT_OF_BANDS): ("meters have no band left", "OFPMMFC_OUT_OF_BANDS"),
}
_KIND_WORDS = {  # a whole error type the profile should have ruled out
    ofp.OFPET_BAD_MATCH: "hardware does not support a match field of this lane",
    ofp.OFPET_BAD_ACTION: "hardware does not support an action of this lane",
    ofp.OFPET_BAD_INSTRUCTION: "hardware does not support an instruction of this lane (goto-table, meter?)",
}


def error_reason(err_type: int, code: int, switch: str = "") -> str:
    """``OFPET_... code N``, then, for the errors an operator can act on, what it means:
    ``OFPET_FLOW_MOD_FAILED code 1: s1's flow table is full (OFPFMFC_TABLE_FULL)``."""
    names = {v: k for k, v in vars(ofp).items() if k.startswith("OFPET_") and isinstance(v, int)}
    raw = f"{names.get(err_type, f'type {err_type}')} code {code}"
    whose = f"{switch}'s" if switch else "the switch's"
    if (err_type, code) in _WORDS:
        words, name = _WORDS[(err_type, code)]
        return f"{raw}: {whose} {words} ({name})"
    if err_type in _KIND_WORDS:
        return f"{raw}: {whose} {_KIND_WORDS[err_type]}"
    return raw


def with_xids(ofmsgs: list[Any], xid: Callable[[], int]) -> list[Any]:
    """The messages with fresh xids. A cached desired FlowMod sent before (the same flow deleted
    behind our back twice, a second ovs-vswitchd restart) already has one and os-ken refuses to
    set another: it is sent as a copy with its own."""
    out = [copy.copy(m) if m.xid is not None else m for m in ofmsgs]
    for msg in out:
        msg.xid = None
        msg.set_xid(xid())
    return out


class Wire:
    """Stage, write and wait for batches; flow-stats and aggregate-stats requests."""

    def __init__(self, state: SwitchState) -> None:
        self.state = state

    def stage(self, dpid: int, ofmsgs: list[Any]) -> Staged | str:
        """``ofmsgs`` (their xids already set) + a barrier, expected by the tracker; or why
        nothing may be sent."""
        state = self.state
        if dpid not in state.connected:
            return f"{state.switch_name(dpid)} not connected"
        if not state.may_write():
            return f"{state.switch_name(dpid)} not changed: this controller is not master"
        barrier = parser.OFPBarrierRequest(None)
        barrier.set_xid(state.xid())
        batch = state.tracker.expect_barrier(dpid, [m.xid for m in ofmsgs], barrier.xid)
        return dpid, [*ofmsgs, barrier], batch

    def write(self, staged: list[Staged]) -> list[Batch | str]:
        """Write staged batches: through ``send_many`` when several switches are due, else one
        ``send`` each. Per batch: the Batch to wait on, or why it was not written."""
        state = self.state
        pairs = [(dpid, msgs) for dpid, msgs, _ in staged]
        if state.send_many is not None and len(pairs) > 1:
            written = state.send_many(pairs)
        else:
            written = [state.send(dpid, msgs) for dpid, msgs in pairs]
        out: list[Batch | str] = []
        for (dpid, _, batch), ok in zip(staged, written, strict=True):
            if ok:
                out.append(batch)
            else:
                state.tracker.forget(batch)
                out.append(f"{state.switch_name(dpid)} not connected")
        return out

    def apply(self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Tolerate = never) -> str | None:
        """Send to every switch at once, then wait for all barriers. None, or the first failure
        (a standby says so: the lane manager then leaves the lane to the master)."""
        failure = self.send_all(per_dpid, timeout_s, tolerate)()
        if failure and not self.state.may_write() and "not master" not in failure:
            failure = f"{failure} (this controller is not master any more)"
        return failure

    def send_all(
        self, per_dpid: dict[int, list[Any]], timeout_s: float, tolerate: Tolerate = never
    ) -> Callable[[], str | None]:
        """Send to every switch at once; the returned function waits for all barriers and gives
        None or the first failure."""
        deadline = time.monotonic() + timeout_s
        failure = None
        staged: list[Staged] = []
        for dpid, ofmsgs in per_dpid.items():
            ready = self.stage(dpid, with_xids(ofmsgs, self.state.xid))
            if isinstance(ready, str):
                failure = failure or ready
            else:
                staged.append(ready)
        batches: list[Batch] = []
        for sent in self.write(staged):
            if isinstance(sent, str):
                failure = failure or sent
            else:
                batches.append(sent)
        return lambda: self._wait_all(batches, deadline, timeout_s, tolerate, failure)

    def _wait_all(
        self, batches: list[Batch], deadline: float, timeout_s: float, tolerate: Tolerate, failure: str | None
    ) -> str | None:
        state = self.state
        for batch in batches:
            if not batch.wait(deadline):
                state.tracker.forget(batch)
                failure = failure or f"{state.switch_name(batch.dpid)} did not confirm within {timeout_s:g} s"
                state.mark_suspect([batch.dpid])  # what it holds now is unknown: drift check
            elif batch.error and not tolerate(batch):
                failure = failure or f"{state.switch_name(batch.dpid)} refused: {batch.error}"
                state.mark_suspect([batch.dpid])
        return failure

    # ---- requests with a reply body ----------------------------------------------------------
    def flow_stats(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> list[Any] | None:
        """The switch's flows in a cookie range, or None (not connected, error, timeout)."""
        req = parser.OFPFlowStatsRequest(
            None, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, cookie_mask, parser.OFPMatch()
        )
        body = self.ask(dpid, req, timeout_s)
        return body

    def flow_count(self, dpid: int, cookie: int, cookie_mask: int, timeout_s: float = 2.0) -> int | None:
        """How many flows the switch holds in a cookie range (one aggregate-stats request), or None."""
        req = parser.OFPAggregateStatsRequest(
            None, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY, cookie, cookie_mask, parser.OFPMatch()
        )
        body = self.ask(dpid, req, timeout_s)
        return int(body[0].flow_count) if body else None

    def group_descs(self, dpid: int, timeout_s: float = 2.0) -> list[Any] | None:
        """The switch's groups (OFPMP_GROUP_DESC), or None (not connected, error, timeout)."""
        return self.ask(dpid, parser.OFPGroupDescStatsRequest(None, 0), timeout_s)

    def ask(self, dpid: int, req: Any, timeout_s: float) -> list[Any] | None:
        """Send one multipart request and wait for its whole reply body, or None (not connected,
        an error, nothing heard for ``timeout_s``: a reply still coming in parts is waited for,
        up to ``pending.PARTS_CAP`` times ``timeout_s``)."""
        state = self.state
        req.set_xid(state.xid())
        waiting = state.tracker.expect_stats(dpid, req.xid)
        if dpid not in state.connected or not state.send(dpid, [req]):
            state.tracker.forget(waiting)
            return None
        while not waiting.done.is_set():  # ``timeout_s`` of silence, not for the whole reply
            left = waiting.wait_left(timeout_s, time.monotonic())
            if left <= 0.0:
                break
            waiting.done.wait(left)
        if not waiting.done.is_set() or waiting.error:
            state.tracker.forget(waiting)
            return None
        return waiting.body
