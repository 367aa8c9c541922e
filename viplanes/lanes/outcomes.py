"""What an activation's result writes (pure): the lane's columns, the audit decision and reason;
and the result of an activation that raised. Shared by ``activation.py``'s single, batched and
one-statement paths."""

from __future__ import annotations

from viplanes.dataplane.base import is_transient
from viplanes.domain.values import ActivationResult
from viplanes.lanes import states
from viplanes.store.db import is_outage, outage_text
from viplanes.store.models import Lane


def failed_by(exc: BaseException, latency: float) -> ActivationResult:
    """The result of an activation that raised. A lost database (a crash, a fail-over) is no
    verdict on the lane: transient, so it stays installing for ``recover``. Anything else is a
    broken controller, which must fail the lane, not the request."""
    if is_outage(exc):
        return ActivationResult(False, f"data plane busy: database unreachable ({outage_text(exc)})", latency)
    return ActivationResult(False, f"data plane error: {exc}", latency)


def outcome_of(lane: Lane, result: ActivationResult, latency: float, now: float) -> tuple[dict[str, object], str, str]:
    """What an activation result writes: the lane's columns (active; interrupted when it is
    carried but no usable path is left now; failed; or, for a transient reason, still installing
    for ``recover``), the audit decision and the audit reason."""
    if result.ok and result.held:  # carried, held at its first switch until a path returns
        values = states.change(states.INSTALLING, states.INTERRUPTED, result.reason)
        outcome = "held"
    elif result.ok:
        values = states.change(states.INSTALLING, states.ACTIVE, at=now)
        outcome = "done"
    elif is_transient(result.reason) and lane.expires_at > now:
        outcome = "retry"
        values = {"reason": f"waiting for the data plane: {result.reason}"}
    else:
        outcome = "failed"
        values = states.change(states.INSTALLING, states.FAILED, f"activation failed: {result.reason}", now)
    values["activation_ms"] = latency * 1000.0
    return values, outcome, "installed" if result.ok and not result.held else result.reason
