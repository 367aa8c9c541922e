"""The acceptor holds a NAT'd flow's sighting that has no post-NAT pair yet (0.5 s) and judges it
again when the border's sighting arrives: the common order at the lab's sampling, which cost the
flow its lane until a later sighting (p99 3.8 s in the bench). Holding changes only when a
sighting is judged: the grant, the policy and the DSCP-nonce watch still decide, and a flood of
sightings that never pair is bounded and counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.world import World
from tests.unit.auto.conftest import Mono, set_policy
from tests.unit.auto.test_nat_takeover import NAT_BOX, NAT_PORT, POST, PRE, sampled
from viplanes.auto.acceptor import Acceptor
from viplanes.auto.service import AutoSettings, SettingError
from viplanes.domain.sighting import Sighting
from viplanes.settings import Settings


@pytest.fixture
def acceptor(world: World, mono: Mono) -> Iterator[Acceptor]:
    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=512, clock=mono)
    assert set_policy(world, min_rate_mbps=1, max_auto_lanes=50).status_code == 200
    acc.refresh()
    yield acc
    acc.stop()


def offer(acc: Acceptor, s: object) -> None:
    assert isinstance(s, Sighting)
    acc.offer(s)


def test_a_sighting_ahead_of_its_pair_is_laned_when_the_pair_arrives(world: World, acceptor: Acceptor) -> None:
    world.dataplane.watched = {PRE: 90, POST: 88}
    offer(acceptor, sampled())  # s1's sighting first: no post-NAT flow known yet
    assert acceptor.run_pending() == [None] and acceptor.counts["nat_held"] == 1
    offer(acceptor, sampled(NAT_BOX, NAT_PORT))  # s3's, a moment later: the held one is judged again
    (lane_id,) = acceptor.run_pending()
    assert lane_id is not None and acceptor.counts["nat_confirmed"] == 1
    assert world.dataplane.active[lane_id].takeover is not None
    assert acceptor.counts["nat_unpaired"] == 0


def test_a_released_sighting_still_needs_the_watch(world: World, acceptor: Acceptor) -> None:
    """A forger who samples a post-NAT flow (port 60000) right after the real sighting gets the
    held sighting judged sooner, not laned: the watch on its port counts nothing."""
    world.dataplane.watched = {PRE: 90, POST: 88}
    offer(acceptor, sampled())
    acceptor.run_pending()
    offer(acceptor, sampled(NAT_BOX, 60000))
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_released"] == 1 and acceptor.counts["nat_unconfirmed"] == 1
    assert world.dataplane.active == {}


def test_a_released_sighting_rereads_the_policy(world: World, acceptor: Acceptor) -> None:
    """Automation switched off for the grant while the sighting was held: no lane."""
    world.dataplane.watched = {PRE: 90, POST: 88}
    offer(acceptor, sampled())
    acceptor.run_pending()
    assert set_policy(world, enabled=False).status_code == 200
    offer(acceptor, sampled(NAT_BOX, NAT_PORT))  # noted: the prefilter index is not yet refreshed
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_released"] == 1 and acceptor.counts["grant_auto_off"] == 1
    assert world.dataplane.watches == [] and world.dataplane.active == {}


def test_a_flood_of_post_nat_samples_releases_a_sighting_once(world: World, acceptor: Acceptor) -> None:
    offer(acceptor, sampled())
    acceptor.run_pending()
    for _ in range(100):
        offer(acceptor, sampled(NAT_BOX, 60000))
    assert acceptor.run_pending() == [None]  # one re-judgment, one (failed) watch
    assert acceptor.counts["nat_released"] == 1 and len(world.dataplane.watches) == 3


def test_a_flood_of_unpaired_sightings_is_bounded_and_delays_no_other_flow(
    world: World, acceptor: Acceptor, mono: Mono
) -> None:
    """300 sampled flows from the desktop and the server with no post-NAT pair: at most 16 per
    source are held, the rest judged unpaired at once (counted), the table empties when the holds
    end, and another flow whose pair is known is laned at once, not after the flood."""
    for sport in range(150):
        offer(acceptor, sampled(sport=41000 + sport))
        offer(acceptor, sampled("10.1.0.20", sport=41000 + sport))
    assert acceptor.run_pending() == [None] * 300
    assert acceptor.counts["nat_held"] == 32  # 16 per source (nathold.MAX_PER_SOURCE)
    assert acceptor.nat_held == 32
    assert acceptor.counts["nat_hold_full"] == 268 == acceptor.counts["nat_unpaired"]
    world.dataplane.watched = {PRE: 90, POST: 88}
    offer(acceptor, sampled(NAT_BOX, NAT_PORT))  # releases the held 32 (same destination and port)
    offer(acceptor, sampled())  # the real flow, its pair known
    results = acceptor.run_pending()
    assert len(results) == 33 and sum(r is not None for r in results) == 1
    assert acceptor.counts["nat_ambiguous"] == 0 and acceptor.counts["nat_unconfirmed"] == 32
    mono.now += 0.6
    acceptor.run_pending()
    assert acceptor.nat_held == 0


def test_an_unpaired_flow_is_held_once(world: World, acceptor: Acceptor, mono: Mono) -> None:
    """Its next sighting after the hold ends is judged afresh (and held again), not refused as a
    repeat for the acceptor's 2 s memory."""
    offer(acceptor, sampled())
    acceptor.run_pending()
    offer(acceptor, sampled())  # sampled again during the hold: the held one stands for it
    assert acceptor.run_pending() == [] and acceptor.counts["repeated"] == 1
    mono.now += 0.6
    offer(acceptor, sampled())
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_unpaired"] == 1 and acceptor.counts["nat_held"] == 2


def test_no_hold_judges_at_once(world: World, mono: Mono) -> None:
    acc = Acceptor(world.app.extensions["viplanes"].manager, clock=mono, nat_hold_s=0)
    set_policy(world, min_rate_mbps=1)
    acc.refresh()
    offer(acc, sampled())
    assert acc.run_pending() == [None] and acc.counts["nat_unpaired"] == 1 and acc.counts["nat_held"] == 0


def test_the_hold_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AutoSettings.from_settings(Settings.from_env()).nat_hold_s == 0.5
    monkeypatch.setenv("VIPLANES_AUTO_NAT_HOLD_S", "0")
    assert AutoSettings.from_settings(Settings.from_env()).nat_hold_s == 0.0
    monkeypatch.setenv("VIPLANES_AUTO_NAT_HOLD_S", "60")  # past the pairing's 2 s window: pointless
    assert AutoSettings.from_settings(Settings.from_env()).nat_hold_s == 2.0
    monkeypatch.setenv("VIPLANES_AUTO_NAT_HOLD_S", "-1")
    with pytest.raises(SettingError, match="VIPLANES_AUTO_NAT_HOLD_S"):
        AutoSettings.from_settings(Settings.from_env())


def test_the_held_count_is_a_gauge(world: World, mono: Mono) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from viplanes.auto.metrics import AutomationCollector
    from viplanes.auto.service import Automation

    auto = Automation(world.app.extensions["viplanes"].manager, AutoSettings(), world.clock)
    set_policy(world, min_rate_mbps=1)
    auto.acceptor.refresh()
    offer(auto.acceptor, sampled())
    auto.acceptor.run_pending()
    registry = CollectorRegistry()
    registry.register(AutomationCollector(auto))
    text = generate_latest(registry).decode()
    assert "viplanes_auto_nat_held 1.0" in text and 'viplanes_auto_sightings_total{outcome="nat_held"} 1.0' in text
    # the grant index: its generation and what it holds, for tests that wait for a new grant
    assert "viplanes_auto_grant_index_refreshes_total 1.0" in text and "viplanes_auto_grants_indexed 1.0" in text
    auto.acceptor.refresh()
    text = generate_latest(registry).decode()
    assert "viplanes_auto_grant_index_refreshes_total 2.0" in text


def test_serve_holds_no_more_than_its_queue_takes(world: World, mono: Mono) -> None:
    """A small queue (``VIPLANES_AUTO_QUEUE``) bounds the holds too: one release then never
    brings back more sightings than the queue can take."""
    from viplanes.auto.service import Automation

    auto = Automation(world.app.extensions["viplanes"].manager, AutoSettings(queue_size=4), world.clock)
    set_policy(world, min_rate_mbps=1)
    auto.acceptor.refresh()
    for sport in range(6):
        offer(auto.acceptor, sampled(sport=41000 + sport))
        auto.acceptor.run_pending()
    assert auto.acceptor.nat_held == 4 and auto.acceptor.counts["nat_hold_full"] == 2
