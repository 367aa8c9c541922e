"""A grant's automation policy and the pure checks a sighting must pass before it may ask for a lane.

The policy never widens a grant: an automatic lane is a normal request that ``policy.rules.decide``
still judges against the grant. These checks only decide whether a sighting may ask at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from viplanes.domain.sighting import Sighting, SightingKind
from viplanes.errors import Invalid

PROTOCOLS = {6: "tcp", 17: "udp"}  # what a lane carries; other protocols never get an automatic lane


@dataclass(frozen=True)
class AutoPolicy:
    """Off by default. A sampled flow needs ``min_rate_mbps`` (over ``window_s``) or ``min_bytes``
    (within ``window_s``); a firefly needs ``fireflies``."""

    enabled: bool = False
    min_rate_mbps: float | None = None
    window_s: float = 2.0
    min_bytes: int | None = None
    idle_s: int = 30
    max_auto_lanes: int = 1
    fireflies: bool = False
    max_duration_s: int = 3600

    def __post_init__(self) -> None:
        problems = []
        if self.min_rate_mbps is not None and not 0 < self.min_rate_mbps <= 1e6:
            problems.append("min_rate_mbps must be in (0, 1e6]")
        if not 0.1 <= self.window_s <= 3600:
            problems.append("window_s must be in [0.1, 3600]")
        if self.min_bytes is not None and not 0 < self.min_bytes <= 10**15:
            problems.append("min_bytes must be in (0, 1e15]")
        if not 1 <= self.idle_s <= 86400:
            problems.append("idle_s must be in [1, 86400]")
        if not 1 <= self.max_auto_lanes <= 1000:
            problems.append("max_auto_lanes must be in [1, 1000]")
        if not 10 <= self.max_duration_s <= 7 * 86400:
            problems.append("max_duration_s must be in [10, 604800]")
        if self.enabled and not self.fireflies and self.min_rate_mbps is None and self.min_bytes is None:
            problems.append("an enabled policy needs a threshold (min_rate_mbps or min_bytes) or fireflies")
        if problems:
            raise Invalid("; ".join(problems), {"problems": problems}, code="invalid_auto_policy")


def trigger_refusal(policy: AutoPolicy, s: Sighting) -> str | None:
    """Why this sighting may not ask for a lane under ``policy`` (a counter name), or None."""
    if not policy.enabled:
        return "grant_auto_off"
    if s.protocol not in PROTOCOLS or s.dst_port is None:
        return "unsupported_flow"
    if s.kind is SightingKind.FIREFLY:
        return None if policy.fireflies else "fireflies_not_allowed"
    if s.kind is SightingKind.FLOW_LABEL:  # a scitags mark in the IPv6 flow label: as a firefly
        return None if policy.fireflies else "flow_label_not_allowed"
    rate_ok = policy.min_rate_mbps is not None and (s.rate_bps or 0.0) >= policy.min_rate_mbps * 1e6
    bytes_ok = policy.min_bytes is not None and (s.bytes_seen or 0) >= policy.min_bytes
    return None if rate_ok or bytes_ok else "below_threshold"


def sampled_floor(policy: AutoPolicy) -> float:
    """The lowest sampled rate (bit/s) at which ``trigger_refusal`` can pass a flow under
    ``policy``: its ``min_rate_mbps``, or 0 when it has none or may pass a flow by its bytes (the
    detector's own threshold then decides, and the acceptor says why not)."""
    if policy.min_rate_mbps is None or policy.min_bytes is not None:
        return 0.0
    return policy.min_rate_mbps * 1e6


def evidence(s: Sighting) -> dict[str, object]:
    """What the lane's record keeps of its trigger."""
    out: dict[str, object] = {"kind": str(s.kind)}
    if s.rate_bps is not None:
        out["rate_bps"] = round(s.rate_bps)
    if s.rate_error is not None:
        out["rate_error"] = s.rate_error
    if s.bytes_seen is not None:
        out["bytes_seen"] = s.bytes_seen
    if s.reporter is not None:
        out["reporter"] = str(s.reporter)
    out.update({k: v for k, v in s.evidence.items()})
    return out
