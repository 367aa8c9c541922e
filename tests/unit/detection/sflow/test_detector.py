"""The detector: threshold, prefilter before any state, a capped flow table, idle expiry, and the
attacks on it (a flood of 5-tuples, flows outside every grant, lying samples)."""

from __future__ import annotations

from functools import lru_cache
from ipaddress import ip_address

import pytest

from tests.support.sightsink import RecordingSink
from viplanes.detection.sflow.detector import Detector, DetectorSettings, PrefixFilter, Sample
from viplanes.domain.sighting import SightingKind, SightingState

AGENT = ip_address("192.0.2.1")
# the same few addresses parsed once: the flood test builds 202,000 samples, and parsing their
# addresses took a third of its time
_address = lru_cache(maxsize=64)(ip_address)


def sample(
    src: str = "10.1.0.10",
    dst: str = "203.0.113.10",
    sport: int = 40000,
    dport: int = 5201,
    n: int = 64,
    size: int = 1514,
) -> Sample:
    return Sample(_address(src), _address(dst), 6, sport, dport, size, n, AGENT)


def feed(det: Detector, rate_bps: float, seconds: float, t0: float = 0.0, n: int = 64, **kw: object) -> float:
    """A steady flow sampled exactly 1 in n (deterministic): one sample every n packets."""
    interval = n * 1514 * 8 / rate_bps
    t = t0
    while t < t0 + seconds:
        det.observe(sample(n=n, **kw), t)  # type: ignore[arg-type]
        t += interval
    return t


def detector(sink: RecordingSink, **kw: object) -> Detector:
    return Detector(sink, PrefixFilter(["10.1.0.0/24"]), DetectorSettings(**kw))  # type: ignore[arg-type]


def test_elephant_is_sighted_with_rate_and_error() -> None:
    sink = RecordingSink()
    det = detector(sink, threshold_bps=50e6)
    feed(det, 200e6, 1.0)
    assert sink.sightings, det.stats
    s = sink.sightings[0]
    assert (s.kind, s.state, s.dst_port, s.protocol, s.reporter) == (
        SightingKind.SFLOW,
        SightingState.ONGOING,
        5201,
        6,
        AGENT,
    )
    assert s.rate_bps is not None and s.rate_bps >= 50e6 and s.rate_error is not None and 0 < s.rate_error < 0.5
    # a young flow is counted over the whole window: crossing 50 of 200 Mbit/s takes ~1/4 window
    assert s.observed_at < 0.35


def test_mouse_is_never_sighted() -> None:
    sink = RecordingSink()
    det = detector(sink, threshold_bps=50e6)
    feed(det, 20e6, 5.0)
    assert sink.sightings == []


def test_sighting_repeats_only_every_resend_s() -> None:
    """Past its first window (1 s) a flow is sighted again only every ``resend_s``; within it, only
    as its estimate grows (test_detector_floor.py)."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=10e6, resend_s=2.0)
    feed(det, 100e6, 5.0)
    young = [s for s in sink.sightings if s.observed_at < 1.0]
    times = [young[-1].observed_at] + [s.observed_at for s in sink.sightings if s.observed_at >= 1.0]
    assert len(times) == 3 and all(b - a >= 2.0 for a, b in zip(times, times[1:], strict=False))
    rates = [s.rate_bps or 0 for s in young]
    assert all(b >= 1.5 * a for a, b in zip(rates, rates[1:], strict=False)), rates


def test_few_samples_say_nothing() -> None:
    """One huge sampled frame x a huge sampling rate is not an elephant: min_samples."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=10e6, min_samples=16)
    for i in range(15):
        det.observe(sample(n=1_000_000), i * 0.01)
    assert sink.sightings == []


def test_outside_prefilter_keeps_no_state() -> None:
    """Abuse: a flood from outside every automation grant costs a counter, not a table entry."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=1e6)
    for i in range(5000):
        det.observe(sample(src=f"172.16.{i // 250}.{i % 250}", dst="198.51.100.7", sport=i), i * 1e-4)
    assert len(det) == 0 and det.stats.filtered == 5000 and sink.sightings == []


def test_either_end_inside_the_prefixes_passes() -> None:
    f = PrefixFilter(["10.1.0.0/24", "2001:db8::/32"])
    assert f(ip_address("10.1.0.5"), ip_address("8.8.8.8"))
    assert f(ip_address("8.8.8.8"), ip_address("10.1.0.5"))
    assert f(ip_address("2001:db8::1"), ip_address("2001:4860::1"))
    assert not f(ip_address("10.2.0.5"), ip_address("8.8.8.8"))


def test_tuple_flood_cannot_grow_the_table_nor_hide_the_elephant() -> None:
    """Abuse: 200,000 one-sample 5-tuples from inside the prefix (a port scan, a spoofing host)
    against a table of 1,000: the table stays at its cap, and an elephant sampled among them is
    still sighted (least recently sampled goes first; the elephant is sampled every ~0.5 ms)."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=50e6, max_flows=1000)
    interval = 64 * 1514 * 8 / 200e6
    t = 0.0
    for i in range(200_000):
        det.observe(sample(sport=1024 + i % 60000, dport=i // 60000 + 1, size=64), t)
        if i % 100 == 0:
            det.observe(sample(sport=40000, dport=5201), t)
        t += interval / 100
    assert len(det) <= 1000
    assert det.stats.evicted >= 199_000
    assert any(s.dst_port == 5201 for s in sink.sightings)


def test_idle_flows_are_forgotten() -> None:
    sink = RecordingSink()
    det = detector(sink, idle_s=10.0)
    det.observe(sample(sport=1), 0.0)
    det.observe(sample(sport=2), 5.0)
    assert det.expire(9.0) == 0
    assert det.expire(12.0) == 1 and len(det) == 1
    assert det.expire(20.0) == 1 and len(det) == 0


@pytest.mark.parametrize(("n", "size"), [(0, 1500), (-64, 1500), (64, -1)])
def test_lying_samples_are_refused(n: int, size: int) -> None:
    """Abuse: a sample claiming sampling rate 0 or negative (a forged datagram) or a negative length."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=1.0, min_samples=1)
    det.observe(sample(n=n, size=size), 0.0)
    assert det.stats.malformed == 1 and len(det) == 0 and sink.sightings == []


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        DetectorSettings(slots=1)
    with pytest.raises(ValueError):
        DetectorSettings(max_flows=0)


def test_two_switches_sampling_one_flow_do_not_add_up() -> None:
    """A flow crossing two sampled switches: each agent estimates it alone (30 + 30 is not 60)."""
    sink = RecordingSink()
    det = detector(sink, threshold_bps=50e6)
    interval = 64 * 1514 * 8 / 30e6
    t = 0.0
    while t < 3.0:
        det.observe(sample(), t)
        det.observe(
            Sample(
                ip_address("10.1.0.10"), ip_address("203.0.113.10"), 6, 40000, 5201, 1514, 64, ip_address("192.0.2.2")
            ),
            t,
        )
        t += interval
    assert sink.sightings == [] and len(det) == 2
