"""A young flow refused for its rate is judged again at its next sighting (issue 32, found in the
Mininet lab): the detector's estimate of a flow younger than its window grows as the window fills,
so its first sighting may fall below the grant's ``min_rate_mbps`` (or the detector's threshold is
below it). The acceptor used to remember the refused flow as queued for 2 s and the detector
re-sighted it only every 2 s, so the lane came seconds late."""

from __future__ import annotations

from tests.support.sightsink import RecordingSink
from tests.unit.auto.conftest import set_policy, sighting
from tests.unit.detection.sflow.test_detector import detector, feed
from viplanes.domain.sighting import SightingKind, SightingState


def _sampled(rate_mbps: float):
    return sighting(
        kind=SightingKind.SFLOW, state=SightingState.ONGOING, reporter="192.0.2.1", rate_bps=rate_mbps * 1e6
    )


def test_a_flow_refused_below_the_grants_rate_is_judged_again_at_its_next_sighting(world, acceptor, mono):
    set_policy(world, fireflies=False, min_rate_mbps=100)
    acceptor.refresh()
    acceptor.offer(_sampled(60))  # young: its window is still filling
    assert acceptor.run_pending() == [None] and acceptor.counts["below_threshold"] == 1
    mono.now += 0.5
    acceptor.offer(_sampled(120))  # half a second later, the window full
    (lane_id,) = acceptor.run_pending()
    assert lane_id is not None, dict(acceptor.counts)
    assert acceptor.counts["repeated"] == 0


def test_a_queued_flow_still_asks_once_per_repeat_period(world, acceptor, mono):
    """The fix forgets only rate refusals: a flow that got its lane does not ask again at once."""
    set_policy(world, fireflies=False, min_rate_mbps=100)
    acceptor.refresh()
    acceptor.offer(_sampled(120))
    assert acceptor.run_pending()[0] is not None
    mono.now += 0.5
    acceptor.offer(_sampled(120))
    assert acceptor.counts["repeated"] == 1 and acceptor.run_pending() == []


def test_the_detector_sights_a_flow_above_its_threshold_again_within_half_a_second() -> None:
    sink = RecordingSink()
    det = detector(sink, threshold_bps=10e6)  # the default resend_s
    feed(det, 100e6, 2.0)
    times = [s.observed_at for s in sink.sightings]
    assert len(times) >= 2 and times[1] - times[0] <= 0.55, times


def test_a_flood_of_below_rate_sightings_of_one_flow_queues_one_at_a_time(world, acceptor, mono):
    """Abuse: forged samples keep one flow just under the grant's rate. Forgetting a rate refusal
    must not open the queue to every repeat: while the flow waits, its repeats are dropped."""
    set_policy(world, fireflies=False, min_rate_mbps=100)
    acceptor.refresh()
    for _round in range(3):
        for _ in range(100):
            acceptor.offer(_sampled(60))
        assert acceptor.run_pending() == [None]  # one judgment per round, not 100
        mono.now += 0.1
    assert acceptor.counts["below_threshold"] == 3 and acceptor.counts["repeated"] == 297
