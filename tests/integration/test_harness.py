"""The harness is real: userspace OVS + Mininet + our os-ken controller + iperf3.

    h1 ---1- vlhNs1 -2--- h2        (one userspace OVS bridge, fail_mode=secure)
                |
           controller (this repo, subprocess, 127.0.0.1:free port)

With fail_mode=secure the bridge forwards nothing until our controller installs the default
forwarding, so traffic flowing proves the controller is connected and working.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.labcampus import iperf_client
from tests.support.procs import ControllerProcess
from tests.support.runtag import ifname

pytestmark = pytest.mark.integration

DPID = 0x7E57


def _offloads_off(node, intf: str) -> None:
    node.cmd(f"ethtool -K {intf} tx off rx off tso off gso off gro off")


@pytest.fixture
def controller(tmp_path: Path):
    ctl = ControllerProcess(tmp_path / "controller.log").start()
    try:
        yield ctl
    finally:
        ctl.stop()


@pytest.fixture
def two_host_net(controller: ControllerProcess):
    from mininet.link import TCLink
    from mininet.net import Mininet
    from mininet.node import OVSSwitch, RemoteController

    tag = ifname("vlh", longest_suffix="h1-eth0")
    net = Mininet(controller=None, link=TCLink, autoSetMacs=False, build=False, waitConnected=False)
    try:
        net.addController(
            "c0", controller=RemoteController, ip="127.0.0.1", port=controller.port, protocol="ssl"
        )  # the controller runs with the lab PKI (procs.py)
        switch = net.addSwitch(
            f"{tag}s1", cls=OVSSwitch, datapath="user", protocols="OpenFlow13", failMode="secure", dpid=f"{DPID:016x}"
        )
        h1 = net.addHost(f"{tag}h1", ip="10.77.0.1/24")
        h2 = net.addHost(f"{tag}h2", ip="10.77.0.2/24")
        net.addLink(h1, switch, port2=1, bw=100)
        net.addLink(h2, switch, port2=2, bw=100)
        net.build()
        net.start()
        for link in net.links:
            _offloads_off(link.intf1.node, link.intf1.name)
            _offloads_off(link.intf2.node, link.intf2.name)
        yield net, h1, h2
    finally:
        net.stop()
        for ctl in net.controllers:  # RemoteController.stop() does nothing: its shell lived on
            ctl.terminate()


def test_switch_joins_controller_and_iperf3_runs(controller, two_host_net) -> None:
    net, h1, h2 = two_host_net
    assert controller.wait_for_dpids({DPID}), "switch never appeared in the controller"
    # the first ping may lose its packet while the just-connected switch gets its base flows
    losses = [net.ping([h1, h2], timeout="1") for _ in range(3)]
    assert 0.0 in losses, losses
    # a child of the test, not a daemon (-D would outlive the namespace if no client came)
    server = h2.popen(["iperf3", "-s", "-1", "-p", "5201"])
    try:
        for _ in range(50):
            if ":5201" in h2.cmd("ss -ltn"):
                break
            time.sleep(0.1)
        out = h1.cmd(iperf_client("10.77.0.2", 5201, 2))
    finally:
        server.kill()
        server.wait(10)
    result = json.loads(out)
    assert "error" not in result, result.get("error")
    mbps = result["end"]["sum_received"]["bits_per_second"] / 1e6
    assert mbps > 20, f"iperf3 moved only {mbps:.1f} Mbit/s over a 100 Mbit/s link"
