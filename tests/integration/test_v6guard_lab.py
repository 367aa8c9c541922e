"""Issue 28 item 7 on the dual-stack lab campus: the three IPv6 first-hop attacks, now failing,
while the campus's own v6 (ping6 through the firewall, neighbour resolution, a v6 lane) works.

    desktop -s1- s2 ==bypass== s3 - edge - s4 - cloud
    server  -/   |             | \\
                 fw --------- nat  dtn

The attackers put raw frames on their own interface (AF_PACKET, ``ndframes``: no scapy here):
the server (no v6 of its own) claims the desktop's gateway with an NA and an NS, the DTN claims
the NAT box's address towards the edge router, and the server sends router advertisements to a
desktop that accepts them (``accept_ra=2``; the lab turns RAs off, which hid this). Harm is read
where it lands: the victim's neighbour cache and routes, and its pings.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.support import ndframes as nf
from tests.support.labcampus import COUNTERS_S, IPERF_SERVER_ARGS, iperf_client, lab_campus
from tests.support.paths import DUALSTACK_YAML
from tests.support.procs import wait_for
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration
GW6, NAT6, EDGE6 = "2001:db8:1::1", "2001:db8:3::2", "2001:db8:3::1"
DESKTOP6, CLOUD6 = "2001:db8:1::10", "2001:db8:ff::10"
DESKTOP_MAC, SERVER_MAC, DTN_MAC, EDGE_MAC = (
    "02:00:00:01:00:10",
    "02:00:00:01:00:20",
    "02:00:00:03:00:30",
    "02:00:00:03:00:01",
)


class V6Lab:
    def __init__(self, net: Any, serve: ServeChild, token: str) -> None:
        self.net, self.serve, self.token = net, serve, token

    def node(self, name: str) -> Any:
        return self.net.host(name)

    def lladdr(self, node: str, address: str) -> str:
        """The MAC the node's neighbour cache holds for ``address`` ('' when none)."""
        out = self.node(node).cmd(f"ip -6 neigh show {address}")
        found = re.search(r"lladdr (\S+)", out)
        return found[1] if found else ""

    def pings(self, node: str, dst: str, count: int = 3) -> int:
        """Echo replies received of ``count``."""
        out = self.node(node).cmd(f"ping -6 -c {count} -i 0.2 -W 1 {dst}")
        found = re.search(r"(\d+) received", out)
        return int(found[1]) if found else 0

    def send(self, node: str, frames: list[bytes]) -> None:
        self.node(node).cmd(nf.send_command(f"{node}-eth0", frames))

    def rx_packets(self, node: str) -> int:
        return int(self.node(node).cmd(f"cat /sys/class/net/{node}-eth0/statistics/rx_packets"))

    def api(self, method: str, path: str, **kw: Any) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.request(method, f"{self.serve.url}/api/v1{path}", timeout=15, headers=headers, **kw)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[V6Lab]:
    grant = {
        "src_prefixes": ["2001:db8:1::/64"],
        "dst_prefixes": ["2001:db8:ff::/64"],
        "protocols": ["tcp"],
        "ports": ["5201-5209"],
        "max_duration_s": 3600,
        "max_lanes": 2,
    }
    workdir = tmp_path_factory.mktemp("v6guard")
    with lab_campus(workdir, "vera", grant, topology=DUALSTACK_YAML) as (net, serve, token):
        v6 = V6Lab(net, serve, token)
        deadline = time.monotonic() + 20  # the switches connect and take their base flows
        while v6.pings("desktop", CLOUD6, 1) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        yield v6


def test_a_host_cannot_take_the_desktops_gateway(lab: V6Lab) -> None:
    """NA (override) and NS (source link-layer option) from the server, each claiming the
    firewall's inside address: on the old flows the desktop's cache took the server's MAC and
    its pings to the cloud went there."""
    fw_mac = lab.node("fw").cmd("cat /sys/class/net/fw-in/address").strip()
    s_ll = nf.link_local(SERVER_MAC)
    attacks = {
        "NA": nf.nd_frame(SERVER_MAC, DESKTOP_MAC, s_ll, DESKTOP6, nf.NA, nf.na_body(GW6, SERVER_MAC)),
        "NS": nf.nd_frame(SERVER_MAC, DESKTOP_MAC, GW6, DESKTOP6, nf.NS, nf.ns_body(DESKTOP6, SERVER_MAC)),
    }
    harm = {}
    for kind, frame in attacks.items():
        lab.pings("desktop", CLOUD6, count=1)  # resolves the gateway: a first echo may wait on ND (CI: 2 of 3)
        assert lab.pings("desktop", CLOUD6) == 3  # the gateway resolved, through the firewall
        assert lab.lladdr("desktop", GW6) == fw_mac
        rx0 = lab.rx_packets("server")
        lab.send("server", [frame] * 3)
        replies = lab.pings("desktop", CLOUD6)
        taken = lab.lladdr("desktop", GW6)
        harm[kind] = (taken, replies, lab.rx_packets("server") - rx0)
        lab.node("desktop").cmd(f"ip -6 neigh flush {GW6}")
    assert harm == {kind: (fw_mac, 3, harm[kind][2]) for kind in attacks}, (
        f"(cache entry for the gateway, echo replies of 3, packets the server got): {harm}"
    )


def test_a_host_cannot_take_the_gateways_mac(lab: V6Lab) -> None:
    """The same theft without ND: frames with the firewall's MAC as source from the server's
    port. On the old flows the switches learned that MAC on the server's port and the desktop's
    pings through the firewall went to the server while it lasted (v6: 0, 1 and 2 of 3 answered
    in three runs; v4: 0 of 3 in the first, 3 of 3 in the others: MAC learning races the
    firewall's own frames)."""
    fw_mac = "02:00:00:02:00:01"
    spoof = nf.mac_bytes("ff:ff:ff:ff:ff:ff") + nf.mac_bytes(fw_mac) + b"\x88\xb5" + bytes(50)
    assert lab.pings("desktop", CLOUD6) == 3
    server = lab.node("server")
    # the attacker keeps re-asserting the MAC (every 20 ms for 4 s) while the desktop pings
    server.cmd(nf.send_command("server-eth0", [spoof], repeat=200, every=0.02) + " &")
    time.sleep(0.3)
    v4 = re.search(r"(\d+) received", lab.node("desktop").cmd("ping -c 3 -i 0.2 -W 1 203.0.113.10"))
    harm = (int(v4[1]) if v4 else 0, lab.pings("desktop", CLOUD6))
    server.cmd("wait")
    lab.node("fw").cmd("ping -c 1 -W 1 10.1.0.10 >/dev/null; ping -6 -c 1 -W 1 2001:db8:1::10 >/dev/null")
    assert harm == (3, 3), f"(v4, v6) echo replies of 3 after the spoof: {harm}"


def test_the_dtn_cannot_take_the_edges_inbound_v6(lab: V6Lab) -> None:
    nat_mac = lab.node("nat").cmd("cat /sys/class/net/nat-out/address").strip()
    # the edge resolved the NAT box, its next hop back to the campus (inbound echo requests
    # stop at the firewall: the replies to the desktop's pings take that way)
    assert lab.pings("desktop", CLOUD6) == 3
    assert lab.lladdr("edge", NAT6) == nat_mac
    t_ll = nf.link_local(DTN_MAC)
    frame = nf.nd_frame(DTN_MAC, EDGE_MAC, t_ll, EDGE6, nf.NA, nf.na_body(NAT6, DTN_MAC))
    lab.send("dtn", [frame] * 3)
    harm = (lab.lladdr("edge", NAT6), lab.pings("desktop", CLOUD6))
    lab.node("edge").cmd(f"ip -6 neigh flush {NAT6}")
    assert harm == (nat_mac, 3), f"(the edge's entry for the NAT box, echo replies of 3): {harm}"


def test_rogue_router_advertisements_install_no_route(lab: V6Lab) -> None:
    """Three RAs from the server, each on its own: plain, behind a destination-options header
    (OVS walks it), and split so the ICMPv6 header is in the second fragment (RFC 7113; the
    desktop is set to take fragmented ND, as an OS without RFC 6980 does). On the old flows the
    first two installed a high-preference default route via the server; the third installs none
    even there (Linux refuses a first fragment without the whole header chain, RFC 7112), so for
    hosts without that check the switch's drop of it is shown by ``test_ndguard_ovs.py``."""
    desktop = lab.node("desktop")
    ra = (SERVER_MAC, "33:33:00:00:00:01", nf.link_local(SERVER_MAC), nf.ALL_NODES, nf.RA, nf.ra_body(SERVER_MAC))
    variants = {
        "plain": [nf.nd_frame(*ra)],
        "behind destination options": [nf.behind_dstopts(*ra)],
        "ICMPv6 header in the second fragment": nf.fragmented(*ra),
    }
    sysctl = "sysctl -qw net.ipv6.conf.desktop-eth0.{}={}"
    installed = {}
    try:
        desktop.cmd(sysctl.format("accept_ra", 2) + "; " + sysctl.format("suppress_frag_ndisc", 0))
        for what, frames in variants.items():
            lab.send("server", frames)
            time.sleep(0.3)
            routes = desktop.cmd("ip -6 route show default")
            installed[what] = "proto ra" in routes
            desktop.cmd("ip -6 route del default proto ra 2>/dev/null")
    finally:
        desktop.cmd(sysctl.format("accept_ra", 0) + "; " + sysctl.format("suppress_frag_ndisc", 1))
        desktop.cmd("ip -6 route del default proto ra 2>/dev/null")
    assert installed == dict.fromkeys(variants, False), f"default route via the server installed: {installed}"
    assert lab.pings("desktop", CLOUD6) == 3


def test_the_campus_v6_keeps_working(lab: V6Lab) -> None:
    """Resolution from an empty cache both ways, duplicate address detection, and a v6 lane."""
    desktop = lab.node("desktop")
    desktop.cmd("ip -6 neigh flush all")
    lab.node("fw").cmd("ip -6 neigh flush all")
    assert lab.pings("desktop", CLOUD6) == 3
    # DAD on a new address: tentative clears (no duplicate), the address answers
    desktop.cmd("sysctl -qw net.ipv6.conf.desktop-eth0.accept_dad=1")
    desktop.cmd("ip -6 addr add 2001:db8:1::77/64 dev desktop-eth0")
    time.sleep(2.5)
    addr = desktop.cmd("ip -6 addr show dev desktop-eth0")
    desktop.cmd("ip -6 addr del 2001:db8:1::77/64 dev desktop-eth0; sysctl -qw net.ipv6.conf.desktop-eth0.accept_dad=0")
    assert "2001:db8:1::77" in addr and "tentative" not in addr and "dadfailed" not in addr, addr
    body = {
        "src_ip": DESKTOP6,
        "dst_ip": CLOUD6,
        "protocol": "tcp",
        "dst_port": 5201,
        "duration_s": 600,
        "purpose": "v6 guard",
    }
    r = lab.api("POST", "/lanes", json=body)
    assert r.status_code == 201 and r.json()["state"] == "active", r.text
    lane_id = r.json()["id"]
    cloud = lab.node("cloud")
    server = cloud.popen(["iperf3", "-s", "-1", "-p", "5201", *IPERF_SERVER_ARGS])
    try:
        # listening, not slept on; the client bounded (iperf3 alone can wait forever)
        assert wait_for(lambda: ":5201 " in cloud.cmd("ss -ltn"), 30), "iperf3 server never listened"
        out = desktop.cmd(iperf_client(CLOUD6, 5201, 1, "-6"))
    finally:
        server.wait(15)
    assert out.strip() and '"error"' not in out, out
    deadline = time.monotonic() + COUNTERS_S  # userspace OVS pushes datapath counters lazily
    while (got := int(lab.api("GET", f"/lanes/{lane_id}/stats").json()["bytes"])) < 100_000:
        if time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert got >= 100_000, got
