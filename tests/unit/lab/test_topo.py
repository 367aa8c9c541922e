"""The Mininet topology built from the campus YAML (a graph only: no root, no OVS needed)."""

from __future__ import annotations

import pytest

from tests.support.paths import REPO
from viplanes.lab.nodes import EdgeRouter, Firewall, LabHost, LabSwitch, Nat
from viplanes.lab.topo import IFNAMSIZ, LabTopo, switch_name
from viplanes.topologies.loader import load_topology


@pytest.fixture
def lab_topo(campus_yaml):
    return LabTopo(topology=load_topology(campus_yaml), prefix="vlab12")


def links(topo):
    return [info for _, _, info in topo.links(withInfo=True)]


def test_switches_are_prefixed_with_yaml_dpids(lab_topo):
    assert sorted(lab_topo.switches()) == ["vlab12s1", "vlab12s2", "vlab12s3", "vlab12s4"]
    info = lab_topo.nodeInfo("vlab12s3")
    assert info["dpid"] == "0000000000000003" and info["cls"] is LabSwitch


def test_ports_are_the_yaml_openflow_ports(lab_topo):
    def port_of(node, switch):
        for i in links(lab_topo):
            if {i["node1"], i["node2"]} == {node, switch}:
                return i["port2"] if i["node2"] == switch else i["port1"]
        raise AssertionError(f"{node}-{switch} not cabled")

    assert port_of("desktop", "vlab12s1") == 1
    assert port_of("server", "vlab12s1") == 2
    assert port_of("dtn", "vlab12s3") == 4
    assert port_of("fw", "vlab12s2") == 2
    assert port_of("nat", "vlab12s3") == 1
    assert port_of("edge", "vlab12s4") == 1
    assert port_of("vlab12s2", "vlab12s3") == 3  # the bypass


def test_link_rates_and_direct_middlebox_cable(lab_topo):
    by_pair = {frozenset((i["node1"], i["node2"])): i for i in links(lab_topo)}
    assert by_pair[frozenset(("desktop", "vlab12s1"))]["bw"] == 100
    assert by_pair[frozenset(("vlab12s1", "vlab12s2"))]["bw"] == 200
    cable = by_pair[frozenset(("fw", "nat"))]
    assert {cable["intfName1"], cable["intfName2"]} == {"fw-out", "nat-in"}
    assert "bw" not in cable  # the firewall shapes itself (its DPI cap)
    assert all(i["txo"] is False and i["rxo"] is False for i in links(lab_topo))


def test_node_classes_and_firewall_cap(lab_topo):
    assert lab_topo.nodeInfo("desktop")["cls"] is LabHost
    assert lab_topo.nodeInfo("desktop")["ip"] == "10.1.0.10/24"
    assert lab_topo.nodeInfo("desktop")["defaultRoute"] == "via 10.1.0.1"
    fw = lab_topo.nodeInfo("fw")
    assert fw["cls"] is Firewall and fw["mbps"] == 15 and fw["inside"] == "fw-in"
    assert lab_topo.nodeInfo("nat")["cls"] is Nat and lab_topo.nodeInfo("edge")["cls"] is EdgeRouter
    assert ("10.1.0.0/24", "10.2.0.1") in lab_topo.nodeInfo("nat")["routes"]


def test_unshaped_topology_has_no_rates(campus_yaml):
    t = LabTopo(topology=load_topology(campus_yaml), prefix="vlab12", shape=False)
    assert all("bw" not in i for _, _, i in t.links(withInfo=True))
    assert t.nodeInfo("fw")["mbps"] is None


def test_switch_names_fit_linux_interface_names():
    assert switch_name("vl1234", "s1", 1, 4) == "vl1234s1"
    long = switch_name("vl1234", "core-switch", 7, 48)
    assert long == "vl1234x7" and len(long + "-eth48") <= IFNAMSIZ
    with pytest.raises(ValueError):
        switch_name("vl12345678", "s1", 100, 1000)


def test_mn_custom_file_loads_like_mn_does():
    """`mn --custom` exec()s the file without __file__; it must still find the repo."""

    path = REPO / "mininet" / "campus.py"
    assert not (path.parent / "__init__.py").exists()  # never shadow the real mininet package
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace, namespace)
    topo = namespace["topos"]["campus"]()
    assert sorted(topo.switches()) == ["vlmns1", "vlmns2", "vlmns3", "vlmns4"]
    assert "desktop" in topo.hosts()
