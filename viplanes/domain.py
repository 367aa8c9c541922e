"""Facts shared by the store, the policy and the data plane.

These are the contract between the northbound side (which decides that a lane exists) and the
controller (which makes switches carry it). Nothing here does I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Protocol = Literal["tcp", "udp"]


@dataclass(frozen=True)
class LaneSpec:
    """Everything the controller needs to carry one lane; built from the database row.

    The forward direction is ``src_ip[:src_port] -> dst_ip:dst_port``; the reverse direction is the
    same flow seen from the far end. ``nat_ip`` is the lane-pool address a private source is
    translated to on the lane (None when the source is routable).
    """

    lane_id: int
    src_ip: str
    dst_ip: str
    protocol: Protocol
    dst_port: int
    src_port: int | None
    nat_ip: str | None
    expires_at: float  # unix seconds; the data plane derives hard_timeout from it
    rate_mbps: float | None = None


@dataclass(frozen=True)
class ActivationResult:
    """Answer of the data plane to "carry this lane": ok only when every switch confirmed."""

    ok: bool
    reason: str
    latency_s: float


@dataclass(frozen=True)
class LaneCounters:
    """Traffic a lane carried, summed over its ingress rules (forward and reverse)."""

    packets: int
    bytes: int
