"""A flow someone saw: the seam between what notices big or marked flows (sFlow samples, scitags
fireflies, the IPv6 flow label) and what may turn one into an automatic lane.

A sighting carries no authority. Whatever sends it (a sampled switch port, an unauthenticated UDP
firefly) only says "this 5-tuple exists and looks like this"; the acceptor decides, against the
grants that allow automatic lanes, whether a lane follows. Detectors produce sightings; one
acceptor (``SightingSink``) consumes them; neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address, IPv6Address
from typing import Protocol

IPAddress = IPv4Address | IPv6Address


class SightingKind(StrEnum):
    """Where the sighting came from; recorded on the lane as its trigger."""

    SFLOW = "sflow"  # sampled packets at an access switch: a rate estimate
    FIREFLY = "firefly"  # a scitags firefly (UDP 10514): a marked transfer, start/ongoing/end
    FLOW_LABEL = "flow_label"  # the IPv6 flow label carries an experiment id


class SightingState(StrEnum):
    """A firefly says start/ongoing/end; a sampled flow is ``ongoing`` while it is seen."""

    START = "start"
    ONGOING = "ongoing"
    END = "end"


@dataclass(frozen=True)
class Sighting:
    """One observation of one flow, as the detector measured it.

    ``reporter`` is the address the observation arrived from (the sFlow agent, the firefly's UDP
    source): an acceptor checks a firefly's ``reporter`` against ``src_ip`` so a host cannot ask
    for someone else's flow. ``rate_bps`` and ``rate_error`` are the estimate and its stated
    relative error (sampling); ``None`` when the source gives no rate (a firefly).
    """

    kind: SightingKind
    state: SightingState
    src_ip: IPAddress
    dst_ip: IPAddress
    protocol: int  # IP protocol number (6 TCP, 17 UDP)
    src_port: int | None
    dst_port: int | None
    observed_at: float  # steady-clock seconds (viplanes.domain.clock)
    reporter: IPAddress | None = None
    rate_bps: float | None = None
    rate_error: float | None = None
    bytes_seen: int | None = None
    evidence: dict[str, str] = field(default_factory=dict)  # e.g. experiment, activity, agent


class SightingSink(Protocol):
    """Where detectors hand their sightings. Must return quickly and never raise on bad input:
    it is called from a detector's receive loop."""

    def offer(self, sighting: Sighting) -> None: ...
