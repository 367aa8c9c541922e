"""The cabling probes' flows (``linkprobe.py``), walked through the simulated campus: a probe on a
declared link port reaches the controller, bypass ports included; on a host's port it is dropped,
so a campus host cannot put a frame in front of the verifier (issue 42)."""

from __future__ import annotations

import pytest

from tests.support.flowsim import make_packet
from tests.support.netsim import Network
from tests.support.paths import REPO
from viplanes.controller.compile.lane import compile_base
from viplanes.controller.compile.linkprobe import ETH_TYPE_PROBE, PROBE_DST, link_ports
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import PortRef

REDUNDANT = REPO / "topologies" / "campus-redundant.yaml"


@pytest.fixture(scope="module")
def net() -> Network:
    topo = load_topology(REDUNDANT)
    network = Network(topo)
    network.install(compile_base(topo))
    return network


def _probe() -> dict:
    return make_packet(eth_src="02:00:00:00:00:06", eth_dst=PROBE_DST, eth_type=ETH_TYPE_PROBE)


def test_probes_on_every_declared_link_port_go_to_the_controller(net: Network) -> None:
    topo = load_topology(REDUNDANT)
    ends = [end for link in topo.links for end in (link.a, link.b)]
    assert len(ends) == 16 and link_ports(topo, "s3") == [3, 5, 6, 7, 8]
    for end in ends:  # bypass ports (s3:3, s6:1, ...) drop all else, but not the probes
        outcomes = net.inject(end, _probe())
        assert [(o.kind, o.node) for o in outcomes] == [("CONTROLLER", end.switch)], end


def test_probes_from_a_host_or_a_middlebox_port_are_dropped(net: Network) -> None:
    topo = load_topology(REDUNDANT)
    ports = [h.iface.attach for h in topo.hosts] + [PortRef("s2", 2), PortRef("s3", 1), PortRef("s3", 2)]
    for at in ports:
        assert at is not None
        assert [o.kind for o in net.inject(at, _probe())] == ["drop"], at
