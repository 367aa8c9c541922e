"""Dual-stack topology: ip6/gateway6 on hosts and legs, validated like the v4 fields."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.paths import REPO
from viplanes.cli.topology import topology
from viplanes.topologies.loader import TopologyError, parse_topology

DUAL = REPO / "topologies" / "campus-dualstack.yaml"


def data() -> dict:
    return yaml.safe_load(DUAL.read_text())


def test_dual_stack_loads() -> None:
    topo = parse_topology(data())
    desktop = topo.host("desktop")
    assert str(desktop.ip6) == "2001:db8:1::10" and desktop.needs_nat  # v4 NAT'd, v6 as itself
    assert topo.host_by_ip("2001:db8:1::10") is desktop and topo.host_by_ip("10.1.0.10") is desktop
    assert topo.host("server").ip6 is None and topo.host_by_ip("2001:db8:1::20") is None


@pytest.mark.parametrize(
    "host_over,problem",
    [
        ({"ip6": "fe80::10/64"}, "not a global unicast"),
        ({"ip6": "fd00:1::10/64", "gateway6": "fd00:1::1"}, "not a global unicast"),
        ({"ip6": "2001:db8:1::10"}, "expected address/prefix"),
        ({"gateway6": "2001:db8:9::1"}, "is not in the host's subnet"),
        ({"gateway6": "2001:db8:1::99"}, "not an ip6 address of a middlebox"),
        ({"ip6": None}, "ip6 and gateway6 go together"),
        ({"ip6": "2001:db8:ff::10/64", "gateway6": "2001:db8:ff::1"}, "duplicate address"),
    ],
)
def test_bad_v6_fields(host_over: dict, problem: str) -> None:
    d = data()
    d["hosts"][0].update(host_over)
    if d["hosts"][0].get("ip6") is None:
        d["hosts"][0].pop("ip6")
    with pytest.raises(TopologyError) as exc:
        parse_topology(d)
    assert problem in str(exc.value), str(exc.value)


def test_check_command_shows_v6(tmp_path: Path) -> None:
    r = CliRunner().invoke(topology, ["check", str(DUAL)])
    assert r.exit_code == 0 and "2001:db8:1::10/64 (no NAT)" in r.output
    d = data()
    d["edge"]["inside"]["ip6"] = "ff02::1/64"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    r = CliRunner().invoke(topology, ["check", str(bad)])
    assert r.exit_code == 1 and "edge.inside.ip6" in r.output
