"""What an allowed request still answers when the campus cannot carry it now: an identical lane
is live, the lane pool is exhausted, or its switches are not ready.

Split from ``manager.py``: these build answers and the spec the readiness check judges, and
change nothing; ``LaneManager._insert`` decides when to give them.
"""

from __future__ import annotations

from typing import Any

from viplanes.domain.values import LaneSpec
from viplanes.errors import Conflict, Unavailable
from viplanes.lanes.requests import LaneTrigger
from viplanes.lanes.targets import LaneTarget
from viplanes.policy.rules import LaneRequest

# Retry-After for a request refused because its switches are not ready: OVS retries a lost
# controller every max_backoff (1 s in the lab) and a reconcile takes well under a second.
NOT_READY_RETRY_S = 2


def duplicate_lane(dup: int, own: bool) -> Conflict:
    """An identical live lane; another researcher's lane id stays hidden, like its 404."""
    return Conflict(
        "an identical lane is already live for this time" + (f" (lane {dup})" if own else ""),
        {"lane_id": dup} if own else {},
        code="duplicate_lane",
    )


def pool_exhausted(pool: str) -> Unavailable:
    return Unavailable(
        "the lane address pool is exhausted; try again when a lane ends",
        {"pool": pool},
        code="lane_pool_exhausted",
    )


def not_ready(waiting: list[str], readiness: dict[str, Any]) -> Unavailable:
    """The switches an immediate lane needs are not connected and reconciled: a 503 to retry.

    Said for a researcher: which switches, whether any switch is connected at all (the lane's path
    lists only its own, three of four when none is), and that it is the operators' matter."""
    switches = readiness.get("switches") or []
    connected = [s.get("name") for s in switches if isinstance(s, dict) and s.get("connected")]
    if switches and not connected:
        what = f"no switch is connected to the controller (this lane needs {', '.join(waiting)})"
    else:
        what = f"switches this lane needs are not connected to the controller or not yet set up: {', '.join(waiting)}"
    return Unavailable(
        f"{what}. Your request is fine; this is for the network operators to fix "
        "(`viplanes doctor` names the cause). Ask again once they have",
        {"switches": waiting, "connected": connected, "retry_after_s": NOT_READY_RETRY_S},
        code="switches_not_ready",
        retry_after=NOT_READY_RETRY_S,
    )


def spec_to_check(
    src: str, target: LaneTarget, req: LaneRequest, nat_ip: str | None, trigger: LaneTrigger | None
) -> LaneSpec:
    """The lane as the data plane would carry it (no id yet), for the readiness check."""
    return LaneSpec(
        0,
        src,
        target.single_address(),
        req.protocol,  # type: ignore[arg-type]
        target.single_port(),
        req.src_port,
        nat_ip,
        req.expires_at,
        req.rate_mbps,
        takeover=trigger.takeover if trigger is not None else None,
    )
