"""Lane paths run from the host's port to the edge router's port over switch links only."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from viplanes.topologies.loader import load_topology, parse_topology
from viplanes.topologies.paths import Hop, NoLanePath, bypass_ports, lane_path, lane_paths, path_links


def test_desktop_path_uses_bypass(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    assert lane_path(topo, "desktop") == (Hop(1, "s1", 1, 3), Hop(2, "s2", 1, 3), Hop(3, "s3", 3, 2))


def test_dtn_at_edge_switch_is_one_hop(campus_yaml: Path) -> None:
    assert lane_path(load_topology(campus_yaml), "dtn") == (Hop(3, "s3", 4, 2),)


def test_cloud_and_unknown_hosts_have_no_lane(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    with pytest.raises(NoLanePath, match="cloud host"):
        lane_path(topo, "cloud")
    with pytest.raises(NoLanePath, match="unknown host"):
        lane_path(topo, "nobody")


def test_no_path_without_bypass(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["links"] = [link for link in data["links"] if not link.get("bypass")]
    topo = parse_topology(data, "t.yaml")
    with pytest.raises(NoLanePath, match=r"no lane path from host 'desktop' \(at s1:1\)"):
        lane_path(topo, "desktop")
    paths = lane_paths(topo)
    assert isinstance(paths["desktop"], NoLanePath) and isinstance(paths["dtn"], tuple)


def test_bypass_preferred_over_default_links(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    # a faster default link parallel to the s2-s3 bypass: the lane still takes the bypass port
    data["links"].append({"a": "s2:9", "b": "s3:9", "mbps": 1000})
    topo = parse_topology(data, "t.yaml")
    assert lane_path(topo, "desktop")[1:] == (Hop(2, "s2", 1, 3), Hop(3, "s3", 3, 2))
    # a two-link bypass detour s1 - s5 - s2 beats the one default link s1 - s2
    data["switches"].append({"name": "s5", "dpid": 5})
    data["links"] += [
        {"a": "s1:8", "b": "s5:1", "mbps": 10, "bypass": True},
        {"a": "s5:2", "b": "s2:8", "mbps": 10, "bypass": True},
    ]
    topo = parse_topology(data, "t.yaml")
    assert lane_path(topo, "desktop") == (
        Hop(1, "s1", 1, 8),
        Hop(5, "s5", 1, 2),
        Hop(2, "s2", 8, 3),
        Hop(3, "s3", 3, 2),
    )


def test_bypass_ports(campus_yaml: Path) -> None:
    assert bypass_ports(load_topology(campus_yaml)) == {2: {3}, 3: {3}}


def test_paths_are_remembered_per_topology_object(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    first = lane_path(topo, "desktop")
    assert lane_path(topo, "desktop") is first  # computed once
    with pytest.raises(NoLanePath, match="cloud host"):
        lane_path(topo, "cloud")
    with pytest.raises(NoLanePath, match="cloud host"):
        lane_path(topo, "cloud")  # the remembered refusal keeps its message
    assert topo == load_topology(campus_yaml)  # the memo is not part of the value
    import dataclasses

    rewired = dataclasses.replace(topo, links=topo.links[:1])  # a new object starts afresh
    with pytest.raises(NoLanePath, match="no lane path"):
        lane_path(rewired, "desktop")


REDUNDANT = Path(__file__).resolve().parents[3] / "topologies" / "campus-redundant.yaml"


def _without(topo: Any, *names: str) -> Any:
    import dataclasses

    return dataclasses.replace(topo, unusable_links=frozenset(names))


def test_parallel_links_are_all_kept_and_the_first_named_wins() -> None:
    topo = load_topology(REDUNDANT)
    assert lane_path(topo, "desktop") == (Hop(1, "s1", 1, 3), Hop(2, "s2", 1, 3), Hop(3, "s3", 3, 2))
    # the parallel bypass link takes over when the first is unusable: a path the old
    # best-of-parallel graph could not give (it kept only one s2-s3 link)
    assert lane_path(_without(topo, "s2:3-s3:3"), "desktop") == (
        Hop(1, "s1", 1, 3),
        Hop(2, "s2", 1, 4),
        Hop(3, "s3", 5, 2),
    )


def test_dtn_moves_to_the_disjoint_bypass_then_the_default_uplink() -> None:
    topo = load_topology(REDUNDANT)
    first = lane_path(topo, "dtn")
    assert [h.switch for h in first] in (["s5", "s6", "s3"], ["s5", "s7", "s3"])
    used = path_links(topo, first)
    assert len(used) == 2
    other = lane_path(_without(topo, used[0]), "dtn")
    assert {h.switch for h in other} & {"s6", "s7"} and not set(path_links(topo, other)) & set(used)
    # both bypass paths down: the default uplink s5-s3 still carries the lane
    down = _without(topo, "s5:2-s6:1", "s7:2-s3:7")
    assert lane_path(down, "dtn") == (Hop(5, "s5", 1, 4), Hop(3, "s3", 8, 2))


def test_no_usable_link_names_the_unusable_ones() -> None:
    topo = _without(load_topology(REDUNDANT), "s2:3-s3:3", "s2:4-s3:5")
    with pytest.raises(NoLanePath, match=r"not usable now: s2:3-s3:3, s2:4-s3:5"):
        lane_path(topo, "desktop")


def test_path_links_names_each_crossed_link(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    assert path_links(topo, lane_path(topo, "desktop")) == ("s1:3-s2:1", "s2:3-s3:3")
    assert path_links(topo, lane_path(topo, "dtn")) == ()
