"""A name lane's re-resolve through a switch without masked port matches (issue 31): the
addresses it keeps are bounded by the match budget counted in exact ports there, as the request
itself was, not in masked entries."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.clock import FakeClock
from tests.support.paths import CAMPUS_YAML
from tests.support.world import ask, make
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.features import entries_per_destination
from viplanes.lanes.names import NameRefresher
from viplanes.lanes.resolver import StaticResolver
from viplanes.topologies.loader import parse_topology
from viplanes.topologies.model import Topology


def s3_maskless() -> Topology:
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == "s3":
            sw["features"] = {"masked_ports": False}
    return parse_topology(data, "maskless.yaml")


def test_entries_per_destination_follow_the_path() -> None:
    topo = s3_maskless()
    assert entries_per_destination(topo, "198.51.100.30", ((9000, 9003),)) == 4  # the DTN: s3 only
    masked = parse_topology(yaml.safe_load(Path(CAMPUS_YAML).read_text()), "campus.yaml")
    assert entries_per_destination(masked, "198.51.100.30", ((9000, 9003),)) == 1


def test_a_growing_name_keeps_what_the_exact_ports_allow(sqlite_url: str, clock: FakeClock) -> None:
    """The attack: ask for a name that resolves to 2 addresses x 4 ports (8 exact matches on s3,
    the budget), then let it resolve to 10: counted in masked entries (1 per address), all 10
    would be kept: 40 exact entries per direction on s3."""
    resolver = StaticResolver({"grow.example": (["203.0.113.60", "203.0.113.61"], 30.0)})
    world = make(sqlite_url, clock, MemoryDataplane(), s3_maskless(), resolver, max_lane_matches=8)
    r = ask(world, src_ip="198.51.100.30", dst_host="grow.example", dst_ports="9000-9003")
    assert r.status_code == 201, r.get_json()
    lane = r.get_json()
    resolver.set("grow.example", [f"203.0.113.{i}" for i in range(60, 70)], 30)
    clock.advance(31)
    NameRefresher(world.app.extensions["viplanes"].manager).refresh_due()
    kept = world.dataplane.active[lane["id"]].dst_nets
    assert kept == ("203.0.113.60/32", "203.0.113.61/32")  # 2 x 4 exact ports = the budget of 8
    world.app.extensions["viplanes"].db.dispose()
