"""A lane for a connection already running through the campus NAT would change its public
address mid-flow: the cloud resets it (seen in the lab, docs/automatic-lanes.md). So a sighting
of a NAT'd host's running flow (sampled, or a firefly naming its source port) never asks for a
lane, and the detector keeps no state for such sources. Without the rule a forged sFlow sample
or firefly could cut a researcher's transfer inside an automatic grant."""

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


@pytest.mark.parametrize("kind", [SightingKind.FIREFLY, SightingKind.SFLOW])
def test_a_running_natd_flow_gets_no_lane(world: World, acceptor: Acceptor, kind: SightingKind) -> None:
    assert set_policy(world, min_rate_mbps=1).status_code == 200
    acceptor.refresh()
    acceptor.offer(sighting(kind=kind, rate_bps=5e8))
    assert acceptor.run_pending() == []
    assert acceptor.counts["nat_in_flight"] == 1
    assert world.dataplane.active == {}


def test_the_detector_keeps_no_state_for_natd_sources(world: World, acceptor: Acceptor) -> None:
    set_policy(world)
    acceptor.refresh()
    assert not acceptor.may_concern(ip_address("10.1.0.10"), ip_address("203.0.113.10"))
