"""Rate from sampled packets: what one flow sent over a sliding window, and how wrong that can be.

Open vSwitch samples each packet with probability 1/N (N the sampling rate). With k packets of a
flow sampled in the window, ``N x sampled bytes`` estimates its bytes; k is about Poisson, so the
relative standard deviation is ~ ``1/sqrt(k)`` and sFlow's rule of thumb states the 95 % bound as
``1.96 / sqrt(k)``. That rule puts the observed k where the unknown mean belongs: at small counts
it covers the truth only 86-94 % of the time (2-13 samples expected). The bound here is the score
(Wilson) interval of the Poisson mean instead, the largest relative distance from k to either
end: it covers at least ~95 % from 2 samples expected on, and tends to the rule of thumb as k
grows. Packet sizes that vary within the flow add a little on top; a bulk transfer is nearly all
full-size segments. Exact coverage and a sampling simulation are in
tests/unit/detection/sflow/test_estimator.py.

The window is a ring of fixed slots, so a flow costs the same memory at 1 kbit/s or 10 Gbit/s.
The estimate never extrapolates a short history: a flow seen for 0.2 s of a 1 s window counts as
0.2 s of bytes over 1 s, so it can only be under-estimated while young (no false alarm from the
first lucky sample).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.96  # two-sided 95 % normal quantile


def relative_error(samples: int) -> float:
    """95 % relative error of an estimate built from ``samples`` sampled packets (inf for none):
    the farther end of the score interval of the Poisson mean, relative to it."""
    if samples <= 0:
        return math.inf
    k, z2 = float(samples), Z95 * Z95
    half = Z95 * math.sqrt(k + z2 / 4)
    low, high = k + z2 / 2 - half, k + z2 / 2 + half
    return max((k - low) / low, (high - k) / high)


def samples_for_error(error: float) -> int:
    """The fewest samples whose 95 % relative error is at most ``error`` (0.1 = 10 %)."""
    if not error > 0:
        raise ValueError(f"a relative error must be positive, got {error!r}")
    k = math.ceil((Z95 / error) ** 2)  # the rule of thumb's count: never more than this bound needs
    while relative_error(k) > error:
        k += 1
    return k


@dataclass(frozen=True)
class Estimate:
    """One flow's rate over the window: ``rate_bps`` +- ``error`` (relative, 95 %)."""

    rate_bps: float
    error: float
    samples: int
    bytes_estimated: int


class RateWindow:
    """Sampled bytes of one flow in ``slots`` buckets covering the last ``window_s`` seconds."""

    __slots__ = ("_bytes", "_count", "_head", "_slot_s", "_slots", "first_seen", "last_seen")

    def __init__(self, window_s: float, slots: int, now: float) -> None:
        self._slots = slots
        self._slot_s = window_s / slots
        self._bytes = [0] * slots
        self._count = [0] * slots
        self._head = math.floor(now / self._slot_s)  # absolute index of the newest slot
        self.first_seen = now
        self.last_seen = now

    def _advance(self, now: float) -> None:
        index = math.floor(now / self._slot_s)
        if index <= self._head:
            return
        for i in range(self._head + 1, min(index, self._head + self._slots) + 1):
            self._bytes[i % self._slots] = 0
            self._count[i % self._slots] = 0
        self._head = index

    def add(self, frame_bytes: int, sampling_rate: int, now: float) -> None:
        """One sampled packet of ``frame_bytes`` at ``now`` (an older time counts as now), kept
        scaled by its own sampling rate: two agents may sample at different rates."""
        self._advance(now)
        slot = self._head % self._slots
        self._bytes[slot] += frame_bytes * sampling_rate
        self._count[slot] += 1
        self.last_seen = max(self.last_seen, now)

    def estimate(self, now: float) -> Estimate:
        """The flow's rate over the window ending at ``now``: the bytes of every whole slot and
        the current partial one, over exactly the time they cover (so a steady flow is not
        biased low by the slot edges; a young one is, on purpose)."""
        self._advance(now)
        est_bytes = sum(self._bytes)
        samples = sum(self._count)
        covered_s = (self._slots - 1) * self._slot_s + (now - self._head * self._slot_s)
        return Estimate(est_bytes * 8 / covered_s, relative_error(samples), samples, est_bytes)
