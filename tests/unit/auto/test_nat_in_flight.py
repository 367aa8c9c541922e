"""A lane for a connection already running through the campus NAT would change its public
address mid-flow if it used a lane-pool address: the cloud resets it (seen in the lab,
docs/automatic-lanes.md). So a sighting of a NAT'd host's running flow asks for a lane only as a
takeover with a confirmed NAT mapping (tests/unit/auto/test_nat_takeover.py); a firefly naming
its source port, or a sampled flow with no post-NAT pair, never does. Without the rule a forged
sFlow sample or firefly could cut a researcher's transfer inside an automatic grant."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address

import pytest

from tests.support.world import World
from tests.unit.auto.conftest import Mono, set_policy, sighting
from viplanes.auto.acceptor import Acceptor, translated_sources
from viplanes.domain.sighting import SightingKind
from viplanes.topologies.model import Topology


@pytest.fixture
def acceptor(world: World, mono: Mono) -> Iterator[Acceptor]:
    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=8, clock=mono)  # the topology's rule
    yield acc
    acc.stop()


def test_the_campus_nat_hides_the_desktop_and_the_server_not_the_dtn(topo: Topology) -> None:
    nat = translated_sources(topo)
    assert ip_address("10.1.0.10") in nat and ip_address("10.1.0.20") in nat
    assert ip_address("198.51.100.30") not in nat


def test_a_running_natd_flow_named_by_a_firefly_gets_no_lane(world: World, acceptor: Acceptor) -> None:
    assert set_policy(world, min_rate_mbps=1).status_code == 200
    acceptor.refresh()
    acceptor.offer(sighting(kind=SightingKind.FIREFLY, rate_bps=5e8))
    assert acceptor.run_pending() == []
    assert acceptor.counts["nat_in_flight"] == 1
    assert world.dataplane.active == {}


def test_a_running_natd_flow_sampled_without_its_nat_mapping_gets_no_lane(
    world: World, acceptor: Acceptor, mono: Mono
) -> None:
    """Sampled, but no post-NAT flow to pair it with: no mapping, no lane (it was ``nat_in_flight``
    before takeovers; now it waits for a confirmed mapping, held 0.5 s for its pair first)."""
    assert set_policy(world, min_rate_mbps=1).status_code == 200
    acceptor.refresh()
    acceptor.offer(sighting(kind=SightingKind.SFLOW, rate_bps=5e8))
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["nat_held"] == 1
    mono.now += 0.6  # the hold ends with no post-NAT sighting
    assert acceptor.run_pending() == []
    assert acceptor.counts["nat_unpaired"] == 1
    assert world.dataplane.active == {} and world.dataplane.watches == []


def test_the_detector_keeps_state_for_natd_sources_only_inside_a_grant(world: World, acceptor: Acceptor) -> None:
    """A NAT'd source's flow is sampled to be paired with its post-NAT flow, but only inside an
    automation-enabled grant (the old rule kept no state for it at all)."""
    assert not acceptor.may_concern(ip_address("10.1.0.10"), ip_address("203.0.113.10"))  # no policy yet
    set_policy(world)
    acceptor.refresh()
    assert acceptor.may_concern(ip_address("10.1.0.10"), ip_address("203.0.113.10"))
    assert not acceptor.may_concern(ip_address("10.1.0.10"), ip_address("192.0.2.1"))
