"""A flow's own threshold (issue 44): the detector sights a flow only once it reaches the rate the
caller's ``floor`` names for it (the lowest rate a grant covering it lanes at), at the very sample
that reaches it; and while young it is sighted again as its estimate grows, so a post-NAT flow's
noted rate keeps up with it (the acceptor pairs the two twins only within a factor of 2)."""

from __future__ import annotations

from ipaddress import ip_address

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.sightsink import RecordingSink
from tests.unit.detection.sflow.test_detector import sample
from viplanes.detection.sflow.detector import Detector, DetectorSettings, PrefixFilter
from viplanes.detection.sflow.estimator import RateWindow
from viplanes.domain.sighting import IPAddress

WINDOW_S, SLOTS, N = 0.5, 10, 8


def steady(rate_bps: float, phase: float, seconds: float) -> list[float]:
    """Sample times of a steady flow sampled exactly 1 in ``N``."""
    step = N * 1514 * 8 / rate_bps
    return [phase + i * step for i in range(int((seconds - phase) / step))]


def sightings(threshold_bps: float, floor_bps: float | None, times: list[float]) -> list[tuple[float, float]]:
    """(time, rate) of each sighting of one flow at ``times``."""
    sink = RecordingSink()
    floor = None if floor_bps is None else (lambda _s, _d, _p, _port: floor_bps)
    kw = {"floor": floor} if floor is not None else {}
    det = Detector(sink, PrefixFilter(["10.1.0.0/24"]), DetectorSettings(threshold_bps, WINDOW_S, SLOTS), **kw)
    for t in times:
        det.observe(sample(n=N), t)
    return [(s.observed_at, s.rate_bps or 0.0) for s in sink.sightings]


@settings(max_examples=60, deadline=None)
@given(
    rate_mbps=st.floats(1, 100),
    threshold_mbps=st.floats(0.5, 20),
    floor_over=st.floats(1, 8),
    phase=st.floats(0, 0.05),
)
def test_no_sighting_below_the_floor_and_the_first_when_it_is_reached(
    rate_mbps: float, threshold_mbps: float, floor_over: float, phase: float
) -> None:
    """Against a detector whose threshold is the floor itself: the same first sighting."""
    floor = threshold_mbps * floor_over * 1e6
    times = steady(rate_mbps * 1e6, phase, 3.0)
    got = sightings(threshold_mbps * 1e6, floor, times)
    assert all(rate >= floor for _t, rate in got), got
    reference = sightings(floor, None, times)
    assert [t for t, _r in got[:1]] == [t for t, _r in reference[:1]], (got[:3], reference[:3])


def test_the_floor_is_asked_per_flow() -> None:
    asked: list[tuple[IPAddress, IPAddress, int, int | None]] = []

    def floor(src: IPAddress, dst: IPAddress, proto: int, dport: int | None) -> float:
        asked.append((src, dst, proto, dport))
        return 0.0

    det = Detector(RecordingSink(), PrefixFilter(["10.1.0.0/24"]), DetectorSettings(1e6, WINDOW_S, SLOTS), floor)
    for t in steady(10e6, 0.0, 0.3):
        det.observe(sample(n=N), t)
    assert asked and set(asked) == {(ip_address("10.1.0.10"), ip_address("203.0.113.10"), 6, 5201)}


@settings(max_examples=60, deadline=None)
@given(rate_over=st.floats(1, 10), threshold_mbps=st.floats(0.5, 20), phase=st.floats(0, 0.05))
def test_a_young_flows_last_sighting_keeps_up_with_its_estimate(
    rate_over: float, threshold_mbps: float, phase: float
) -> None:
    """At every sample of a young flow (its first window) at least a slot after its last sighting,
    that sighting's rate is within 1.5x of the estimate now: what the acceptor notes of a post-NAT
    flow pairs with its pre-NAT twin (within 2x) as soon as that one is sighted."""
    threshold = threshold_mbps * 1e6
    times = steady(threshold * rate_over, phase, 1.5)
    sink = RecordingSink()
    det = Detector(sink, PrefixFilter(["10.1.0.0/24"]), DetectorSettings(threshold, WINDOW_S, SLOTS))
    window = RateWindow(WINDOW_S, SLOTS, times[0])
    for t in times:
        det.observe(sample(n=N), t)
        window.add(1514, N, t)
        if not sink.sightings or t - times[0] >= WINDOW_S:
            continue
        last = sink.sightings[-1]
        est = window.estimate(t).rate_bps
        assert t - last.observed_at < WINDOW_S / SLOTS or est < 1.5 * (last.rate_bps or 0.0), (t, est, last)
