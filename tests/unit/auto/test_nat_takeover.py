"""The acceptor takes over a running NAT'd connection only with a confirmed mapping: paired from
the samples (pre-NAT at s1, post-NAT at s3) and confirmed by two watch flows whose packet counts
agree. Unpaired, ambiguous or unconfirmed: no lane, counted. A firefly naming such a flow is still
refused (``nat_in_flight``): it carries no NAT mapping."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from tests.support.world import World
from tests.unit.auto.conftest import Mono, set_policy, sighting
from viplanes.auto.acceptor import Acceptor
from viplanes.auto.natmap import NONCES
from viplanes.domain.sighting import SightingKind, SightingState
from viplanes.domain.values import FlowWatch, NatMapping, WatchMark
from viplanes.settings import Settings
from viplanes.store.models import Lane

NAT_BOX, NAT_PORT, CLOUD = "198.51.100.2", 51234, "203.0.113.10"
PRE = FlowWatch("s1", 1, "10.1.0.10", CLOUD, "tcp", 40000, 9000)
POST = FlowWatch("s3", 1, NAT_BOX, CLOUD, "tcp", NAT_PORT, 9000)


@pytest.fixture
def acceptor(world: World, mono: Mono) -> Iterator[Acceptor]:
    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=8, clock=mono)  # the topology's NAT
    assert set_policy(world, min_rate_mbps=1).status_code == 200
    acc.refresh()
    yield acc
    acc.stop()


def sampled(src: str = "10.1.0.10", sport: int = 40000, rate: float = 2e8) -> object:
    return sighting(kind=SightingKind.SFLOW, state=SightingState.ONGOING, src=src, src_port=sport, rate_bps=rate)


def offer_both(acceptor: Acceptor, nat_port: int = NAT_PORT) -> list[int | None]:
    acceptor.offer(sampled(NAT_BOX, nat_port))  # type: ignore[arg-type]
    acceptor.offer(sampled())  # type: ignore[arg-type]
    return acceptor.run_pending()


def test_a_confirmed_mapping_becomes_a_takeover_lane(world: World, acceptor: Acceptor) -> None:
    world.dataplane.watched = {PRE: 90, POST: 88}
    (lane_id,) = offer_both(acceptor)
    assert lane_id is not None and acceptor.counts["nat_confirmed"] == 1
    marked_pre, marked_post, sweep = world.dataplane.watches
    assert [dataclasses.replace(w, mark=None) for w in (marked_pre, marked_post)] == [PRE, POST]
    assert marked_pre.mark is not None and marked_post.mark == WatchMark(marked_pre.mark.set_dscp, 0)
    assert sweep == dataclasses.replace(marked_post, src_port=None)  # restores the nonce from any NAT port
    spec = world.dataplane.active[lane_id]
    assert spec.takeover == NatMapping(NAT_BOX, NAT_PORT) and spec.nat_ip is None
    assert (spec.src_port, spec.dst_ip, spec.dst_port) == (40000, CLOUD, 9000)
    with world.app.extensions["viplanes"].manager.db.read() as s:
        row = s.get(Lane, lane_id)
        assert row is not None and row.nat_ip is None
        detail = json.loads(row.trigger_detail or "{}")
        assert (detail["nat_address"], detail["nat_port"]) == (NAT_BOX, NAT_PORT)
        assert f"NAT {NAT_BOX}:{NAT_PORT}" in row.purpose
        assert (detail["watch_pre_packets"], detail["watch_post_packets"]) == (90, 88)  # how it was confirmed
        assert detail["watch_nonce_dscp"] == marked_pre.mark.set_dscp in NONCES
    # what the researcher sees, and what the controller rebuilds from the store
    body = world.client.get(f"/api/v1/lanes/{lane_id}", headers=world.h("alice")).get_json()
    assert body["trigger"]["nat_port"] == NAT_PORT
    world.dataplane.reconcile()
    assert world.dataplane.active[lane_id].takeover == NatMapping(NAT_BOX, NAT_PORT)


@pytest.mark.parametrize(
    "pre_n, post_n",
    [(90, 0), (90, 30), (0, 0)],
    ids=["a port the NAT did not choose", "another connection", "not running"],
)
def test_counts_that_disagree_make_no_lane(world: World, acceptor: Acceptor, pre_n: int, post_n: int) -> None:
    world.dataplane.watched = {PRE: pre_n, POST: post_n}
    assert offer_both(acceptor) == [None]
    assert acceptor.counts["nat_unconfirmed"] == 1
    assert world.dataplane.active == {}


def test_a_forged_post_nat_sample_with_a_wrong_port_makes_no_lane(world: World, acceptor: Acceptor) -> None:
    """The forger names port 60000 for the desktop's running connection; the border's watch on
    that tuple counts nothing (the real connection uses 51234), so no lane cuts it."""
    world.dataplane.watched = {PRE: 90, POST: 88}  # the real mapping carries traffic
    assert offer_both(acceptor, nat_port=60000) == [None]
    assert acceptor.counts["nat_unconfirmed"] == 1 and world.dataplane.active == {}


def test_no_post_nat_sample_no_lane(world: World, acceptor: Acceptor, mono: Mono) -> None:
    acceptor.offer(sampled())  # type: ignore[arg-type]
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_held"] == 1  # waits 0.5 s for its post-NAT pair
    mono.now += 0.6
    assert acceptor.run_pending() == []
    assert acceptor.counts["nat_unpaired"] == 1 and world.dataplane.watches == []


def test_two_post_nat_candidates_make_no_lane(world: World, acceptor: Acceptor) -> None:
    acceptor.offer(sampled(NAT_BOX, 51300))  # type: ignore[arg-type]
    assert offer_both(acceptor) == [None]
    assert acceptor.counts["nat_ambiguous"] == 1 and world.dataplane.watches == []


def test_a_plane_that_cannot_watch_takes_nothing_over(world: World, acceptor: Acceptor) -> None:
    world.dataplane.watch_counts = lambda watches, seconds: None  # type: ignore[method-assign]
    assert offer_both(acceptor) == [None]
    assert acceptor.counts["nat_unwatched"] == 1 and world.dataplane.active == {}


def test_a_firefly_naming_a_natd_flow_is_still_refused(world: World, acceptor: Acceptor) -> None:
    world.dataplane.watched = {PRE: 90, POST: 88}
    acceptor.offer(sampled(NAT_BOX, NAT_PORT))  # type: ignore[arg-type]
    acceptor.offer(sighting(kind=SightingKind.FIREFLY, src_port=40000))
    assert acceptor.run_pending() == []
    assert acceptor.counts["nat_in_flight"] == 1 and world.dataplane.active == {}


def test_post_nat_flows_pass_the_prefilter_only_towards_grant_destinations(acceptor: Acceptor) -> None:
    from ipaddress import ip_address

    assert acceptor.may_concern(ip_address(NAT_BOX), ip_address(CLOUD))
    assert not acceptor.may_concern(ip_address(NAT_BOX), ip_address("192.0.2.1"))
    acceptor.offer(sampled(NAT_BOX, NAT_PORT))  # type: ignore[arg-type]
    assert acceptor.counts["nat_candidates"] == 1 and acceptor.run_pending() == []  # never queued


def test_the_watch_time_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from viplanes.auto.service import AutoSettings, SettingError

    assert AutoSettings.from_settings(Settings.from_env()).nat_watch_s == 0.8
    monkeypatch.setenv("VIPLANES_AUTO_NAT_WATCH_S", "0.5")
    assert AutoSettings.from_settings(Settings.from_env()).nat_watch_s == 0.5
    monkeypatch.setenv("VIPLANES_AUTO_NAT_WATCH_S", "30")  # longer than the watch flows' hard timeout
    assert AutoSettings.from_settings(Settings.from_env()).nat_watch_s == 2.0
    monkeypatch.setenv("VIPLANES_AUTO_NAT_WATCH_S", "soon")
    with pytest.raises(SettingError, match="VIPLANES_AUTO_NAT_WATCH_S"):
        AutoSettings.from_settings(Settings.from_env())


def test_an_operator_can_refuse_every_running_natd_flow(
    world: World, mono: Mono, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``VIPLANES_AUTO_NAT_TAKEOVER=0`` (a campus firewall that tracks TCP windows strictly: a
    takeover lane's end would cut the connection): sampled NAT'd flows are refused as before."""
    from viplanes.auto.service import AutoSettings

    monkeypatch.setenv("VIPLANES_AUTO_NAT_TAKEOVER", "0")
    settings = AutoSettings.from_settings(Settings.from_env())
    acc = Acceptor(world.app.extensions["viplanes"].manager, clock=mono, nat_takeover=settings.nat_takeover)
    set_policy(world, min_rate_mbps=1)
    acc.refresh()
    world.dataplane.watched = {PRE: 90, POST: 88}
    assert offer_both(acc) == []
    assert acc.counts["nat_in_flight"] == 1 and world.dataplane.watches == [] and world.dataplane.active == {}


def test_a_laned_flow_sampled_again_is_not_watched_again(world: World, acceptor: Acceptor, mono: Mono) -> None:
    """On its lane the flow is still sampled at s1: the acceptor sees its lane and neither pairs
    nor installs watch flows again (0.8 s of the worker each time)."""
    assert set_policy(world, min_rate_mbps=1, max_auto_lanes=3).status_code == 200  # not "too many"
    acceptor.refresh()
    world.dataplane.watched = {PRE: 90, POST: 88}
    (lane_id,) = offer_both(acceptor)
    assert lane_id is not None and len(world.dataplane.watches) == 3  # one watch: pre, post, sweep
    mono.now += 3  # past the acceptor's repeat memory
    assert offer_both(acceptor) == [None]
    assert acceptor.counts["refused_duplicate_lane"] == 1 and len(world.dataplane.watches) == 3


def test_a_flow_with_a_dscp_the_watch_cannot_see_is_refused_before_any_watch(world: World, acceptor: Acceptor) -> None:
    """Issue 41: the watch marks only DSCP 0 packets, so a NAT'd flow with another DSCP could
    never confirm yet held the single worker 0.8 s each (another host's lane went from 81 ms to
    2.4-2.8 s behind 4-8 of them). It is refused at once, with no watch flows."""
    world.dataplane.watched = {PRE: 90, POST: 88}
    acceptor.offer(sampled(NAT_BOX, NAT_PORT))  # type: ignore[arg-type]
    marked = dataclasses.replace(sampled(), evidence={"dscp": "10"})  # type: ignore[type-var]
    acceptor.offer(marked)  # type: ignore[arg-type]
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_dscp"] == 1 and world.dataplane.watches == []


def test_the_detectors_floor_for_a_post_nat_flow_is_its_destinations_grant_rate(world: World) -> None:
    """The acceptor's ``rate_floor``: a pre-NAT flow at its grant's rate, the post-NAT twin (the
    NAT box's address, named by no grant) at the rate of the grants towards its destination."""
    from ipaddress import ip_address

    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=8)
    assert set_policy(world, min_rate_mbps=8).status_code == 200
    acc.refresh()
    assert acc.rate_floor(ip_address("10.1.0.10"), ip_address(CLOUD), 6, 9000) == 8e6
    assert acc.rate_floor(ip_address(NAT_BOX), ip_address(CLOUD), 6, 9000) == 8e6
    assert acc.rate_floor(ip_address(NAT_BOX), ip_address(CLOUD), 6, 22) == 0  # no grant: the detector's own
