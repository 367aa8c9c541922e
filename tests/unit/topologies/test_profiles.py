"""Capability profiles in the topology: loaded, validated with the switch and key named, and
checked against the lanes the campus must carry (``viplanes topology check``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.support.paths import CAMPUS_YAML
from viplanes.cli.topology import topology as topology_cli
from viplanes.topologies.capcheck import budgeted, lane_problems
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.profiles import PROFILES, Features, FlowLimit


def campus(**s3: Any) -> dict[str, Any]:
    """campus.yaml as data, with ``s3`` (the border) given extra keys."""
    data = yaml.safe_load(Path(CAMPUS_YAML).read_text())
    for sw in data["switches"]:
        if sw["name"] == "s3":
            sw.update(s3)
    return data


def problems_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(TopologyError) as exc:
        parse_topology(data, "c.yaml")
    return list(exc.value.problems)


def test_existing_topologies_are_ovs_without_a_limit():
    topo = load_topology(CAMPUS_YAML)
    assert {sw.caps.profile for sw in topo.switches} == {"ovs"}
    assert all(sw.caps.features == Features() and not sw.caps.max_flows.limited for sw in topo.switches)
    assert not budgeted(topo) and lane_problems(topo) == [] and topo.nat_router == ""


def test_profiles_features_and_limits_load():
    topo = parse_topology(
        campus(profile="single_table", features={"meters": True}, max_flows={"total": 500, "tables": {0: 400}})
    )
    s3 = topo.switch("s3")
    assert s3.caps.profile == "single_table"
    assert s3.caps.features == Features(conntrack=False, meters=True, multi_table=False, fast_failover=False)
    assert s3.conntrack is False  # the compiler's stateless border follows the profile
    assert s3.caps.max_flows == FlowLimit(total=500, tables=((0, 400),))
    assert budgeted(topo)
    assert parse_topology(campus(profile="multi_table", max_flows=64)).switch("s3").caps.max_flows.total == 64
    assert PROFILES["multi_table"].multi_table and not PROFILES["multi_table"].conntrack


@pytest.mark.parametrize(
    "keys, where, says",
    [
        ({"profile": "tofino"}, "switches[2] (s3).profile", "expected one of ovs, single_table, multi_table"),
        ({"features": {"teleport": True}}, "switches[2] (s3).features.teleport", "unknown feature"),
        ({"features": {"meters": "no"}}, "switches[2] (s3).features.meters", "expected true or false"),
        ({"features": ["meters"]}, "switches[2] (s3).features", "expected a mapping"),
        ({"max_flows": 0}, "switches[2] (s3).max_flows", "expected an integer 1.."),
        ({"max_flows": True}, "switches[2] (s3).max_flows", "expected an integer 1.."),
        ({"max_flows": -5}, "switches[2] (s3).max_flows", "expected an integer 1.."),
        ({"max_flows": {}}, "switches[2] (s3).max_flows", "give total or tables"),
        ({"max_flows": {"tables": {"zero": 5}}}, "switches[2] (s3).max_flows.tables", "table id must be"),
        ({"max_flows": {"tables": {0: 2**40}}}, "switches[2] (s3).max_flows.tables.0", "expected an integer"),
        ({"max_flows": {"totl": 5}}, "switches[2] (s3).max_flows.totl", ""),
        (
            {"profile": "single_table", "max_flows": {"tables": {1: 50}}},
            "switches[2] (s3).max_flows.tables",
            "without multi_table has only table 0",
        ),
        (
            {"profile": "single_table", "features": {"conntrack": True}},
            "switches[2] (s3).features",
            "conntrack needs meters",
        ),
        (
            {"conntrack": True, "features": {"conntrack": False}},
            "switches[2] (s3).conntrack",
            "contradicts features.conntrack",
        ),
    ],
)
def test_bad_capabilities_name_the_switch_and_key(keys, where, says):
    problems = problems_of(campus(**keys))
    assert any(p.startswith(f"c.yaml: {where}:") and says in p for p in problems), problems


def test_nat_router_must_name_a_translator():
    data = campus()
    data["nat_router"] = "fw"  # a firewall does not translate
    assert any(p.startswith("c.yaml: nat_router:") for p in problems_of(data))


def test_a_nat_lane_on_a_path_that_cannot_translate_is_refused(tmp_path):
    """The attack: a campus file that makes NAT'd lanes leave untranslated (private sources on
    the internet side) loads and serves as if nothing were wrong."""
    path = tmp_path / "campus.yaml"
    path.write_text(yaml.safe_dump(campus(profile="single_table", features={"nat": False})))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 3, result.output
    assert "hosts.desktop: its lanes are NAT'd at s3" in result.output and "lacks nat" in result.output
    assert "hosts.dtn" not in result.output  # a routable host needs no translation
    declared = campus(profile="single_table", features={"nat": False})
    declared["nat_router"] = "edge"  # the operator says the edge router translates lane traffic
    path.write_text(yaml.safe_dump(declared))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 0, result.output
    assert "s3         dpid 3      profile single_table" in result.output
    assert "stateless border" in result.output and "no NAT (done by edge)" in result.output


def test_check_reports_each_switch_profile(tmp_path):
    path = tmp_path / "campus.yaml"
    path.write_text(yaml.safe_dump(campus(profile="multi_table", max_flows=300)))
    out = CliRunner().invoke(topology_cli, ["check", str(path)]).output
    assert "profile multi_table" in out and "max 300 flows" in out and "profile ovs" in out


def test_check_shows_budgets_and_refuses_one_below_the_base_flows(tmp_path):
    """A budget below the base flows refuses every lane forever: caught before the controller runs."""
    path = tmp_path / "campus.yaml"
    path.write_text(yaml.safe_dump(campus(max_flows=100)))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 0 and "s3: 54 base flows of max_flows 100, 46 left for lanes" in result.output
    path.write_text(yaml.safe_dump(campus(max_flows=40)))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 3 and "s3: max_flows 40 does not even hold its 54 base flows" in result.output


def test_v6_lanes_need_ipv6_on_their_path():
    data = yaml.safe_load((Path(CAMPUS_YAML).parent / "campus-dualstack.yaml").read_text())
    data["switches"][1]["features"] = {"ipv6": False}  # s2, on the desktop's path
    problems = lane_problems(parse_topology(data, "ds.yaml"))
    assert any("its IPv6 lanes cross s2" in p for p in problems), problems
