"""A scitags mark in a sampled IPv6 packet's flow label makes an automatic lane at its first
sample, as a firefly start would, and only where everything allows it: a flow inside a grant that
allows scitags marks, on a campus whose topology says it marks flow labels, from a sampling
switch's own sample, within its source's rate. Each refusal is the attack reproduced."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from ipaddress import ip_address
from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.sflowgen import datagram
from tests.support.world import World, make
from tests.unit.auto.conftest import Mono
from viplanes.auto.acceptor import Acceptor
from viplanes.auto.sflowwire import sflow_detection
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.detection.sflow.agents import datagram_agent
from viplanes.detection.sflow.detector import Sample
from viplanes.detection.sflow.flowlabel import encode
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.lanes.resolver import StaticResolver
from viplanes.topologies.model import SflowAgent, Topology

DTN6, CLOUD6 = "2001:db8:3::30", "2001:db8:ff::10"
AGENT = ip_address("127.0.0.1")
DTN_IFINDEX = 104  # s3 port 4, the DTN's


def marked(dport: int = 5201, sport: int = 40000, experiment: int = 16, src: str = DTN6) -> Sample:
    label = encode(experiment, 14, 3)
    return Sample(ip_address(src), ip_address(CLOUD6), 6, sport, dport, 1514, 64, AGENT, DTN_IFINDEX, label)


def gated(det: SflowDetection, s: Sample) -> Sample:
    """``s`` as goflow2 reports it after the gate: its agent address sealed (sampling/seal.py)."""
    assert det.seal is not None
    sealed = det.seal.seal(datagram(str(s.agent), []))
    assert sealed is not None
    return replace(s, agent=datagram_agent(sealed))


@pytest.fixture
def w(sqlite_url: str, clock: FakeClock, dataplane: MemoryDataplane, dual: Topology) -> Iterator[World]:
    world = make(sqlite_url, clock, dataplane, dual, StaticResolver({}))
    yield world
    world.app.extensions["viplanes"].db.dispose()


@pytest.fixture
def acceptor(w: World) -> Acceptor:
    return Acceptor(w.app.extensions["viplanes"].manager, queue_size=64, clock=Mono(), nat_sources=frozenset())


def policy(w: World, **over: Any) -> None:
    body = {"enabled": True, "fireflies": True, "idle_s": 10, "max_auto_lanes": 20, **over}
    r = w.client.put(f"/api/v1/grants/{w.grants['alice']}/auto", json=body, headers=w.h("root"))
    assert r.status_code == 200, r.get_json()


def marking(topo: Topology, experiments: tuple[int, ...] = (16,)) -> Topology:
    """The dual-stack campus with s3 sampling (agent 127.0.0.1) and the given flow-label marks."""
    switches = tuple(
        replace(s, sflow=SflowAgent(AGENT, (AGENT,), ((4, DTN_IFINDEX),))) if s.name == "s3" else replace(s, sflow=None)
        for s in topo.switches
    )
    return replace(topo, switches=switches, flow_label_experiments=experiments)


@pytest.fixture
def detection(acceptor: Acceptor, dual: Topology) -> Iterator[SflowDetection]:
    settings = SflowSettings(enabled=True, listen=("127.0.0.1", 0))
    det = sflow_detection(acceptor, marking(dual), lambda: 100.0, settings)
    assert det is not None
    yield det
    det.stop()


def test_a_marked_flow_gets_a_lane_at_its_first_sample(w: World, acceptor: Acceptor, detection: SflowDetection):
    policy(w)
    acceptor.refresh()
    assert detection._admit(gated(detection, marked()))  # the reader's hook: one sample, no rate threshold
    (lane_id,) = acceptor.run_pending()
    assert lane_id is not None
    lane = w.client.get(f"/api/v1/lanes/{lane_id}", headers=w.h("alice")).get_json()
    assert (lane["src_ip"], lane["dst_ip"], lane["src_port"], lane["dst_port"]) == (DTN6, CLOUD6, 40000, 5201)
    assert lane["trigger"]["kind"] == "flow_label" and lane["trigger"]["experiment"] == "16"
    assert (
        lane["trigger"]["activity"] == "14" and lane["purpose"] == "automatic (flow_label: experiment=16 activity=14)"
    )


def test_a_mark_on_a_flow_outside_the_grant_gets_nothing(w: World, acceptor: Acceptor, detection: SflowDetection):
    policy(w)
    acceptor.refresh()
    detection._admit(gated(detection, marked(dport=22)))  # a port the grant does not name: the acceptor refuses
    detection._admit(
        gated(detection, replace(marked(), dst_ip=ip_address("2001:db8:99::1")))
    )  # outside: dropped before
    assert acceptor.run_pending() == []
    assert acceptor.counts["outside_grant"] == 1 and w.dataplane.active == {}
    assert detection.marks is not None and detection.marks.counts["flow_label_filtered"] == 1


def test_a_grant_without_scitags_marks_gets_nothing(w: World, acceptor: Acceptor, detection: SflowDetection):
    policy(w, fireflies=False, min_rate_mbps=1)  # automation on, but by rate only
    acceptor.refresh()
    detection._admit(gated(detection, marked()))
    assert acceptor.run_pending() == [None]
    assert acceptor.counts["flow_label_not_allowed"] == 1 and w.dataplane.active == {}


def test_a_topology_without_the_flag_reads_no_labels(w: World, acceptor: Acceptor, dual: Topology):
    policy(w)
    acceptor.refresh()
    settings = SflowSettings(enabled=True, listen=("127.0.0.1", 0))
    det = sflow_detection(acceptor, marking(dual, experiments=()), lambda: 100.0, settings)
    assert det is not None and det.marks is None
    try:
        assert det._admit(gated(det, marked()))  # admitted for the rate detector, but no mark
        assert acceptor.counts["offered"] == 0 and acceptor.run_pending() == []
    finally:
        det.stop()


def test_other_experiments_and_foreign_samples_mark_nothing(acceptor: Acceptor, w: World, detection: SflowDetection):
    policy(w)
    acceptor.refresh()
    detection._admit(gated(detection, marked(experiment=17)))  # a random (RFC 6437) label, or another campus's mark
    forged = replace(marked(), agent=ip_address("192.0.2.1"))
    assert not detection._admit(forged)  # not a sampling switch's sample: refused before the mark
    assert acceptor.counts["offered"] == 0 and acceptor.run_pending() == []
    assert detection.guard is not None and detection.guard.counts["sflow_ungated"] == 1  # not through the gate


def test_marks_are_bounded_per_source(w: World, acceptor: Acceptor, detection: SflowDetection):
    policy(w)
    acceptor.refresh()
    for sport in range(41000, 41030):  # 30 new marked flows from one host at once
        detection._admit(gated(detection, marked(sport=sport)))
    assert acceptor.counts["flow_label_rate_bound"] == 20  # burst 10 (the firefly bound's)
