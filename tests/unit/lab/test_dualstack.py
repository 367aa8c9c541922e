"""The dual-stack lab's derived v6 configuration (no Mininet needed): v6 routes mirrored from the
v4 ones, the edge's route back to campus v6 networks, and the dnsmasq command line."""

from __future__ import annotations

from tests.support.paths import REPO
from viplanes.lab.dns import _args
from viplanes.lab.topo import edge_routes6, routes6
from viplanes.topologies.loader import load_topology


def test_v6_routes_mirror_the_v4_routes() -> None:
    topo = load_topology(REPO / "topologies" / "campus-dualstack.yaml")
    fw, nat = topo.middleboxes
    assert routes6(topo, fw.routes) == [("::/0", "2001:db8:2::2")]
    assert routes6(topo, nat.routes) == [("2001:db8:1::/64", "2001:db8:2::1"), ("::/0", "2001:db8:3::1")]
    assert edge_routes6(topo) == [("2001:db8:1::/64", "2001:db8:3::2")]  # via the NAT box: the normal path


def test_a_v4_only_topology_gets_no_v6_routes() -> None:
    topo = load_topology(REPO / "topologies" / "campus.yaml")
    assert all(routes6(topo, box.routes) == [] for box in topo.middleboxes)
    assert edge_routes6(topo) == []


def test_dnsmasq_serves_every_address_of_the_name_and_nothing_else() -> None:
    args = _args("s3.cloud.lab", ["203.0.113.10", "2001:db8:ff::10"], "203.0.113.10", 53)
    assert "--no-resolv" in args and "--no-hosts" in args and "-C" in args  # no machine config read
    assert [a for a in args if a.startswith("--host-record")] == [
        "--host-record=s3.cloud.lab,203.0.113.10",
        "--host-record=s3.cloud.lab,2001:db8:ff::10",
    ]
