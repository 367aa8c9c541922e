"""Lane paths run from the host's port to the edge router's port over switch links only."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from viplanes.topologies.loader import load_topology, parse_topology
from viplanes.topologies.paths import Hop, NoLanePath, bypass_ports, lane_path, lane_paths


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
