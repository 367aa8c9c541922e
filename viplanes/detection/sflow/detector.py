"""Sampled packets -> per-5-tuple rates -> a ``Sighting`` when a flow crosses the threshold.

Pure: the caller passes the time. Two cheap gates come before any per-flow state, because the
samples come from every packet of the campus and an attacker chooses how many 5-tuples it sends:
the caller's prefilter (could this flow be inside some grant that allows automatic lanes?) and a
capped flow table that drops the least recently sampled flow when full. Everything the detector
says is a claim for the acceptor to re-check against the grants (viplanes/domain/sighting.py).

A flow is sighted at the higher of the detector's threshold and the caller's ``floor`` for it (the
lowest rate a grant covering it lanes at): a young flow's estimate rises as its window fills, and
a sighting below its grant's rate would only be refused and asked for again half a second late.
While a sighted flow is younger than its window it is sighted again whenever its estimate has
grown by ``regrow``, so what the acceptor keeps of it (a post-NAT flow's rate, for pairing) grows
with it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from ipaddress import ip_address, ip_network

from viplanes.detection.sflow.estimator import RateWindow, relative_error
from viplanes.domain.sighting import IPAddress, Sighting, SightingKind, SightingSink, SightingState
from viplanes.settings import DEFAULTS

# agent, src, dst, proto, sport, dport: each switch's samples make their own estimate, so a flow
# crossing two sampled switches is not counted twice
FlowKey = tuple[IPAddress | None, IPAddress, IPAddress, int, int | None, int | None]
Prefilter = Callable[[IPAddress, IPAddress], bool]
# src, dst, protocol, dst port -> the rate (bit/s) below which no grant would lane the flow
RateFloor = Callable[[IPAddress, IPAddress, int, int | None], float]


@dataclass(frozen=True)
class Sample:
    """One sampled packet as the collector decoded it."""

    src_ip: IPAddress
    dst_ip: IPAddress
    protocol: int
    src_port: int | None
    dst_port: int | None
    frame_bytes: int
    sampling_rate: int
    agent: IPAddress | None
    in_if: int | None = None  # the sFlow ifIndex the packet came in on
    flow_label: int | None = None  # an IPv6 packet's flow label (20 bits)
    dscp: int | None = None  # the packet's DSCP (the top 6 bits of its IPv4 TOS / IPv6 class)


@dataclass(frozen=True)
class DetectorSettings:
    """Threshold, window and bounds; the defaults are the ones docs/automatic-lanes.md measures."""

    # a flow at or above this rate is sighted
    threshold_bps: float = DEFAULTS.number("VIPLANES_SFLOW_THRESHOLD_MBPS") * 1e6
    # rate window (sFlow-RT's elephant rule uses 0.2 s at 100 Mbit/s)
    window_s: float = DEFAULTS.number("VIPLANES_SFLOW_WINDOW_S")
    slots: int = 10  # the window's buckets: memory per flow is fixed
    min_samples: int = 16  # below this the 95 % error is above 49 %: too few to say anything
    # while a flow stays above, say so again this often: a sighting refused for the grant's rate
    # (higher than this threshold, or a young flow's estimate still rising) is judged again soon;
    # the acceptor keeps a queued flow from asking twice within 2 s
    resend_s: float = 0.5
    # a sighted flow younger than its window is sighted again once its estimate grew by this (at
    # most once a slot)
    regrow: float = 1.5
    idle_s: float = 10.0  # a flow with no sample for this long is forgotten
    max_flows: int = DEFAULTS.integer("VIPLANES_SFLOW_MAX_FLOWS")  # flow table cap; least recently sampled goes

    def __post_init__(self) -> None:
        if self.threshold_bps <= 0 or self.window_s <= 0 or self.slots < 2 or self.min_samples < 1:
            raise ValueError("sflow detector: threshold and window must be > 0, slots >= 2, min_samples >= 1")
        if self.max_flows < 1 or self.idle_s <= 0 or self.resend_s <= 0 or self.regrow <= 1:
            raise ValueError("sflow detector: max_flows >= 1, idle_s > 0, resend_s > 0 and regrow > 1")


class PrefixFilter:
    """The cheap gate: a flow is considered only when its source or its destination lies in one of
    ``prefixes`` (the sources and destinations of the grants that allow automatic lanes)."""

    def __init__(self, prefixes: Iterable[str]) -> None:
        self._nets = tuple(ip_network(p, strict=False) for p in prefixes)

    def __call__(self, src: IPAddress, dst: IPAddress) -> bool:
        return any(src in net or dst in net for net in self._nets)


@dataclass
class _Flow:
    window: RateWindow
    sighted_at: float | None = None  # when the last sighting of this flow went out
    sighted_bps: float = 0.0  # the rate it said
    dscp: int | None = None  # the last sample's (a NAT takeover can watch only DSCP 0: natmap)


@dataclass
class DetectorStats:
    """What the detector did with its samples (exported by the service for operators)."""

    samples: int = 0
    filtered: int = 0  # outside the prefilter: no state kept
    malformed: int = 0  # a sample the detector refused (sampling rate < 1, negative length)
    evicted: int = 0  # flows dropped to keep the table under its cap
    sightings: int = 0


class Detector:
    """Feed ``observe`` with samples; sightings go to ``sink`` as flows cross the threshold."""

    def __init__(
        self,
        sink: SightingSink,
        prefilter: Prefilter,
        settings: DetectorSettings | None = None,
        floor: RateFloor | None = None,
    ) -> None:
        self.settings = settings or DetectorSettings()
        self._sink = sink
        self._prefilter = prefilter
        self._floor = floor
        self._flows: OrderedDict[FlowKey, _Flow] = OrderedDict()
        self.stats = DetectorStats()

    def __len__(self) -> int:
        return len(self._flows)

    def observe(self, sample: Sample, now: float) -> Sighting | None:
        """Account one sample at ``now``; the sighting it caused (also given to the sink), if any."""
        self.stats.samples += 1
        if sample.sampling_rate < 1 or sample.frame_bytes < 0:
            self.stats.malformed += 1
            return None
        if not self._prefilter(sample.src_ip, sample.dst_ip):
            self.stats.filtered += 1
            return None
        s = self.settings
        key: FlowKey = (sample.agent, sample.src_ip, sample.dst_ip, sample.protocol, sample.src_port, sample.dst_port)
        flow = self._flows.get(key)
        if flow is None:
            if len(self._flows) >= s.max_flows:
                self._flows.popitem(last=False)
                self.stats.evicted += 1
            flow = _Flow(RateWindow(s.window_s, s.slots, now))
            self._flows[key] = flow
        else:
            self._flows.move_to_end(key)
        flow.window.add(sample.frame_bytes, sample.sampling_rate, now)
        flow.dscp = sample.dscp if sample.dscp is not None else flow.dscp
        return self._maybe_sight(key, flow, now)

    def _maybe_sight(self, key: FlowKey, flow: _Flow, now: float) -> Sighting | None:
        s = self.settings
        est = flow.window.estimate(now)
        if est.samples < s.min_samples or est.rate_bps < s.threshold_bps:
            return None
        if flow.sighted_at is not None and now - flow.sighted_at < s.resend_s:
            # young, grown, and at most once a slot: ``slots`` more sightings in a flow's life
            young = now - flow.window.first_seen < s.window_s and now - flow.sighted_at >= s.window_s / s.slots
            if not (young and est.rate_bps >= flow.sighted_bps * s.regrow):
                return None
        agent, src, dst, proto, sport, dport = key
        if self._floor is not None and est.rate_bps < self._floor(src, dst, proto, dport):
            return None
        flow.sighted_at, flow.sighted_bps = now, est.rate_bps
        sighting = Sighting(
            kind=SightingKind.SFLOW,
            state=SightingState.ONGOING,
            src_ip=src,
            dst_ip=dst,
            protocol=proto,
            src_port=sport,
            dst_port=dport,
            observed_at=now,
            reporter=agent,
            rate_bps=est.rate_bps,
            rate_error=relative_error(est.samples),
            bytes_seen=est.bytes_estimated,
            evidence={"samples": str(est.samples), "window_s": str(s.window_s)}
            | ({"dscp": str(flow.dscp)} if flow.dscp is not None else {}),
        )
        self.stats.sightings += 1
        self._sink.offer(sighting)
        return sighting

    def expire(self, now: float) -> int:
        """Forget flows idle for ``idle_s`` (oldest first: the table is in sampling order)."""
        gone = 0
        while self._flows:
            key, flow = next(iter(self._flows.items()))
            if now - flow.window.last_seen < self.settings.idle_s:
                break
            del self._flows[key]
            gone += 1
        return gone


def parse_address(text: str) -> IPAddress:
    """An address as the collector writes it (raises ValueError on anything else)."""
    return ip_address(text)
