"""The loader accepts the campus and names file + field + problem for every class of mistake."""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from viplanes.cli.topology import topology as topology_cli
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.model import PortRef


def test_campus_loads(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    assert topo.name == "campus"
    assert [s.dpid for s in topo.switches] == [1, 2, 3, 4]
    desktop = topo.host("desktop")
    assert desktop.iface.attach == PortRef("s1", 1)
    assert desktop.gateway == ipaddress.IPv4Address("10.1.0.1")
    assert desktop.needs_nat and not topo.host("dtn").needs_nat
    assert topo.edge.inside.attach == PortRef("s3", 2)
    assert [link.bypass for link in topo.links] == [False, True]
    nat = next(m for m in topo.middleboxes if m.name == "nat")
    assert nat.outside.attach == PortRef("s3", 1) and nat.inside.attach is None
    assert (ipaddress.IPv4Network("0.0.0.0/0"), ipaddress.IPv4Address("198.51.100.1")) in nat.routes
    assert topo.source == str(campus_yaml)


def test_lane_addresses_stay_in_pool(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    addrs = topo.lane_addresses()
    assert len(addrs) == 32 and all(a in topo.lane_pool.prefix for a in addrs)


def _host(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(h for h in data["hosts"] if h["name"] == name)


Mutation = Callable[[dict[str, Any]], None]

# (mutation, field path expected in the message, words expected in the message)
CASES: list[tuple[str, Mutation, str, str]] = [
    ("unknown top key", lambda d: d.update(colour="red"), "colour", "unknown key"),
    ("unknown host key", lambda d: d["hosts"][1].update(vlan=3), "hosts[1].vlan", "unknown key"),
    ("missing key", lambda d: d["hosts"][0].pop("gateway"), "hosts[0]", "missing required key 'gateway'"),
    ("dpid type", lambda d: d["switches"][0].update(dpid="one"), "switches[0].dpid", "integer"),
    ("dpid bool", lambda d: d["switches"][0].update(dpid=True), "switches[0].dpid", "integer"),
    ("dup dpid", lambda d: d["switches"][1].update(dpid=1), "switches[1].dpid", "duplicate dpid"),
    ("dup name", lambda d: d["hosts"][1].update(name="desktop"), "hosts[1].name", "duplicate name"),
    ("name clash across kinds", lambda d: d["hosts"][1].update(name="s1"), "hosts[1].name", "duplicate name"),
    ("bad mac", lambda d: d["hosts"][0].update(mac="02:00:00:01:00"), "hosts[0].mac", "bad MAC"),
    ("multicast mac", lambda d: d["hosts"][0].update(mac="01:00:5e:00:00:01"), "hosts[0].mac", "unicast"),
    ("dup mac", lambda d: d["hosts"][1].update(mac=d["hosts"][0]["mac"]), "hosts[1].mac", "duplicate MAC"),
    ("bad ip", lambda d: d["hosts"][0].update(ip="10.1.0.300/24"), "hosts[0].ip", "bad address"),
    ("ip without prefix", lambda d: d["hosts"][0].update(ip="10.1.0.10"), "hosts[0].ip", "address/prefix"),
    ("network address", lambda d: d["hosts"][0].update(ip="10.1.0.0/24"), "hosts[0].ip", "network or broadcast"),
    ("dup ip", lambda d: d["hosts"][1].update(ip="10.1.0.10/24"), "hosts[1].ip", "duplicate address"),
    ("bad attach", lambda d: d["hosts"][0].update(attach="s1-1"), "hosts[0].attach", "SWITCH:PORT"),
    ("unknown switch", lambda d: d["hosts"][1].update(attach="s9:1"), "hosts[1].attach", "unknown switch 's9'"),
    ("port reuse", lambda d: d["hosts"][1].update(attach="s1:1"), "hosts[1].attach", "already used by hosts[0].attach"),
    ("port reuse by link", lambda d: d["links"][0].update(a="s1:1"), "links[0].a", "already used"),
    ("port zero", lambda d: d["hosts"][0].update(attach="s1:0"), "hosts[0].attach", "out of range"),
    ("self link", lambda d: d["links"][0].update(b="s1:7"), "links[0]", "to itself"),
    ("bypass type", lambda d: d["links"][1].update(bypass="yes"), "links[1].bypass", "true or false"),
    ("nan mbps", lambda d: d["links"][0].update(mbps=float("nan")), "links[0].mbps", "positive number"),
    ("infinite nic", lambda d: d["hosts"][0].update(nic_mbps=float("inf")), "hosts[0].nic_mbps", "positive number"),
    ("negative mbps", lambda d: d["links"][0].update(mbps=-5), "links[0].mbps", "positive number"),
    ("role", lambda d: d["hosts"][0].update(role="laptop"), "hosts[0].role", "not one of"),
    ("kind", lambda d: d["middleboxes"][0].update(kind="ids"), "middleboxes[0].kind", "not one of"),
    (
        "gateway outside subnet",
        lambda d: d["hosts"][0].update(gateway="10.9.0.1"),
        "hosts[0].gateway",
        "not in the host's subnet",
    ),
    (
        "gateway unknown router",
        lambda d: d["hosts"][0].update(gateway="10.1.0.99"),
        "hosts[0].gateway",
        "not an address of a middlebox",
    ),
    (
        "pool outside edge subnet",
        lambda d: d["lane_pool"].update(prefix="192.0.2.0/28"),
        "lane_pool.prefix",
        "not inside the edge router's inside subnet",
    ),
    (
        "pool overlaps host",
        lambda d: d["lane_pool"].update(prefix="198.51.100.0/27"),
        "lane_pool.prefix",
        "contains 198.51.100.30",
    ),
    ("pool host bits", lambda d: d["lane_pool"].update(prefix="198.51.100.193/27"), "lane_pool.prefix", "host bits"),
    (
        "route via",
        lambda d: d["middleboxes"][0]["routes"][0].update(via="192.0.2.1"),
        "middleboxes[0].routes[0].via",
        "none of this node's subnets",
    ),
    (
        "route dst",
        lambda d: d["middleboxes"][0]["routes"][0].update(dst="nowhere"),
        "middleboxes[0].routes[0].dst",
        "bad prefix",
    ),
    ("edge attach empty", lambda d: d["edge"]["inside"].update(attach=None), "edge.inside.attach", "got nothing"),
    ("host attach empty", lambda d: d["hosts"][0].update(attach=None), "hosts[0].attach", "got nothing"),
    ("edge unattached", lambda d: d["edge"]["inside"].pop("attach"), "edge.inside", "missing required key 'attach'"),
    ("switches not list", lambda d: d.update(switches={"s1": 1}), "switches", "expected a list"),
    (
        "loose leg without peer",
        lambda d: d["middleboxes"][1]["inside"].update(ip="10.3.0.2/30"),
        "middleboxes[0].outside",
        "no other unattached leg is in 10.2.0.0/30",
    ),
    ("no switches", lambda d: d.update(switches=[]), "switches", "at least one switch"),
    ("host not mapping", lambda d: d["hosts"].append("laptop"), "hosts[4]", "expected a mapping"),
]


@pytest.mark.parametrize("mutate,where,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_error_names_file_field_and_problem(
    campus_data: dict[str, Any], mutate: Mutation, where: str, words: str
) -> None:
    data = copy.deepcopy(campus_data)
    mutate(data)
    with pytest.raises(TopologyError) as info:
        parse_topology(data, "lab.yaml")
    assert any(p.startswith(f"lab.yaml: {where}: ") and words in p for p in info.value.problems), info.value.problems


def test_all_problems_are_reported_at_once(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["hosts"][0]["mac"] = "nope"
    data["hosts"][1]["attach"] = "s7:1"
    data["switches"][2]["dpid"] = -3
    with pytest.raises(TopologyError) as info:
        parse_topology(data, "x.yaml")
    fields = {p.split(": ")[1] for p in info.value.problems}
    assert {"hosts[0].mac", "hosts[1].attach", "switches[2].dpid"} <= fields
    assert str(info.value).count("\n") == len(info.value.problems) - 1


def test_not_a_mapping() -> None:
    with pytest.raises(TopologyError, match=r"^f.yaml: top level: expected a mapping"):
        parse_topology(["a"], "f.yaml")


def test_invalid_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(TopologyError, match=r"bad.yaml: invalid YAML \(line"):
        load_topology(bad)
    with pytest.raises(TopologyError, match="cannot read file"):
        load_topology(tmp_path / "missing.yaml")


def test_unquoted_mac_read_as_number_gets_a_hint(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["hosts"][0]["mac"] = yaml.safe_load("12:34:56:12:34:56")  # YAML 1.1 sexagesimal int
    with pytest.raises(TopologyError, match="quote it"):
        parse_topology(data, "f.yaml")


def test_cli_check_ok(campus_yaml: Path) -> None:
    result = CliRunner().invoke(topology_cli, ["check", str(campus_yaml)])
    assert result.exit_code == 0, result.output
    assert "switches (4)" in result.output
    assert "desktop" in result.output and "s1[1>3] s2[1>3] s3[3>2]" in result.output
    assert "cloud host outside the campus" in result.output


def test_cli_check_reports_problems(tmp_path: Path, campus_data: dict[str, Any]) -> None:
    campus_data["hosts"][0]["attach"] = "s9:1"
    campus_data["links"][0]["mbps"] = "fast"
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump(campus_data))
    result = CliRunner().invoke(topology_cli, ["check", str(path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith(f"{path}: ") for line in lines)
    assert "Traceback" not in result.output


def test_duplicate_yaml_keys_are_refused(tmp_path: Path, campus_yaml: Path) -> None:
    text = campus_yaml.read_text().replace("    nic_mbps: 100\n", "    nic_mbps: 100\n    nic_mbps: 5\n", 1)
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    with pytest.raises(
        TopologyError, match=r"dup.yaml: invalid YAML \(line \d+, column \d+\): duplicate key 'nic_mbps'"
    ):
        load_topology(path)


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 2**65),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["s1:1", "s9:0", "10.1.0.1/24", "02:00:00:00:00:01", "0.0.0.0/0", "desktop"]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, prefix + (i,))
    return out


@given(data=st.data())
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_damage_gives_topology_error_never_a_crash(campus_data: dict[str, Any], data: st.DataObject) -> None:
    doc = copy.deepcopy(campus_data)
    for _ in range(data.draw(st.integers(1, 3))):
        spots = [p for p in _paths(doc) if p]
        if not spots:
            break
        spot = data.draw(st.sampled_from(spots))
        parent = doc
        for key in spot[:-1]:
            parent = parent[key]
        if data.draw(st.booleans()) and isinstance(parent, dict):
            del parent[spot[-1]]
        else:
            parent[spot[-1]] = data.draw(LEAVES)
    try:
        topo = parse_topology(doc, "fuzz.yaml")
    except TopologyError as exc:
        assert exc.problems and all(p.startswith("fuzz.yaml: ") for p in exc.problems)
    else:
        assert topo.name and topo.switches


def test_switch_conntrack_field(campus_data: dict[str, Any]) -> None:
    assert all(s.conntrack for s in parse_topology(campus_data, "c.yaml").switches)  # default
    data = copy.deepcopy(campus_data)
    data["switches"][2]["conntrack"] = False
    assert [s.conntrack for s in parse_topology(data, "c.yaml").switches] == [True, True, False, True]
    data["switches"][2]["conntrack"] = "no"
    with pytest.raises(TopologyError, match=r"switches\[2\]\.conntrack: expected true or false"):
        parse_topology(data, "c.yaml")
