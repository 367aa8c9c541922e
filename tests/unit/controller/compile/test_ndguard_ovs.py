"""The ND guard against a real Open vSwitch: its flows (masked link-local sources, nd_target) are
accepted, and real frames (``ndframes``: the lab's attacks, RFC 7113's extension-header and
fragment evasions, the ND a campus needs) meet the verdict the simulator gives. OVS parses each
frame itself (``ofproto/trace`` with the packet in hex). Marked integration: needs root and a
running ovs-vswitchd."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import ndframes as nf
from tests.support.paths import DUALSTACK_YAML
from tests.support.rawof import RawOpenFlow, install
from viplanes.controller.compile.lane import compile_base
from viplanes.topologies.loader import load_topology

pytestmark = pytest.mark.integration
DUAL = load_topology(DUALSTACK_YAML)
DESKTOP_MAC, SERVER_MAC, DTN_MAC = "02:00:00:01:00:10", "02:00:00:01:00:20", "02:00:00:03:00:30"
FW_MAC, NAT_MAC = "02:00:00:02:00:01", "02:00:00:03:00:02"
GW6, NAT6, EDGE6, DESKTOP6, DTN6 = "2001:db8:1::1", "2001:db8:3::2", "2001:db8:3::1", "2001:db8:1::10", "2001:db8:3::30"
ALL = "33:33:00:00:00:01"


def verdict(bridge: str, in_port: int, frame: bytes) -> str:
    done = subprocess.run(
        ["ovs-appctl", "ofproto/trace", bridge, f"in_port={in_port}", frame.hex()],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert done.returncode == 0, done.stderr
    actions = [line for line in done.stdout.splitlines() if line.startswith("Datapath actions:")]
    return "drop" if actions[-1].split(":", 1)[1].strip() == "drop" else "NORMAL"


def ra(mac: str, wrap=nf.nd_frame) -> bytes:
    return wrap(mac, ALL, nf.link_local(mac), "ff02::1", nf.RA, nf.ra_body(mac))


def test_access_switch_s1(bridge: tuple[str, RawOpenFlow]) -> None:
    name, conn = bridge
    install(conn, compile_base(DUAL)[1])  # s1: desktop 1, server 2, trunk to s2 on 3
    s_ll, d_ll = nf.link_local(SERVER_MAC), nf.link_local(DESKTOP_MAC)
    cases = {
        "server: NA for the gateway": (
            2,
            nf.nd_frame(SERVER_MAC, DESKTOP_MAC, s_ll, DESKTOP6, nf.NA, nf.na_body(GW6, SERVER_MAC)),
            "drop",
        ),
        "server: NS from the gateway": (
            2,
            nf.nd_frame(SERVER_MAC, DESKTOP_MAC, GW6, DESKTOP6, nf.NS, nf.ns_body(DESKTOP6, SERVER_MAC)),
            "drop",
        ),
        "server: RA": (2, ra(SERVER_MAC), "drop"),
        "server: RA behind destination options": (2, ra(SERVER_MAC, nf.behind_dstopts), "drop"),
        "server: RA first fragment, ICMPv6 hidden": (
            2,
            nf.fragmented(SERVER_MAC, ALL, s_ll, "ff02::1", nf.RA, nf.ra_body(SERVER_MAC))[0],
            "drop",
        ),
        "server: redirect": (
            2,
            nf.nd_frame(
                SERVER_MAC, DESKTOP_MAC, s_ll, DESKTOP6, nf.REDIRECT, nf.redirect_body(s_ll, "2001:db8:ff::10")
            ),
            "drop",
        ),
        "desktop: NA for itself": (
            1,
            nf.nd_frame(DESKTOP_MAC, ALL, DESKTOP6, "ff02::1", nf.NA, nf.na_body(DESKTOP6, DESKTOP_MAC)),
            "NORMAL",
        ),
        "desktop: NS for the gateway": (
            1,
            nf.nd_frame(
                DESKTOP_MAC, "33:33:ff:00:00:01", d_ll, nf.solicited_node(GW6), nf.NS, nf.ns_body(GW6, DESKTOP_MAC)
            ),
            "NORMAL",
        ),
        "desktop: DAD": (
            1,
            nf.nd_frame(
                DESKTOP_MAC, "33:33:ff:00:00:10", "::", nf.solicited_node(DESKTOP6), nf.NS, nf.ns_body(DESKTOP6, None)
            ),
            "NORMAL",
        ),
        "trunk: the gateway's NA": (
            3,
            nf.nd_frame(FW_MAC, DESKTOP_MAC, GW6, DESKTOP6, nf.NA, nf.na_body(GW6, FW_MAC)),
            "NORMAL",
        ),
        "trunk: the gateway's RA": (3, ra(FW_MAC), "NORMAL"),
    }
    wrong = {what: verdict(name, port, frame) for what, (port, frame, want) in cases.items()}
    assert wrong == {what: want for what, (_, _, want) in cases.items()}


def test_border_switch_s3(bridge: tuple[str, RawOpenFlow]) -> None:
    name, conn = bridge
    install(conn, compile_base(DUAL)[3])  # s3: nat 1, edge 2, bypass 3, dtn 4
    t_ll = nf.link_local(DTN_MAC)
    cases = {
        "dtn: NA for the NAT box": (
            4,
            nf.nd_frame(DTN_MAC, ALL, t_ll, "ff02::1", nf.NA, nf.na_body(NAT6, DTN_MAC)),
            "drop",
        ),
        "dtn: NA for the edge": (
            4,
            nf.nd_frame(DTN_MAC, ALL, t_ll, "ff02::1", nf.NA, nf.na_body(EDGE6, DTN_MAC)),
            "drop",
        ),
        "dtn: NA for itself": (
            4,
            nf.nd_frame(DTN_MAC, ALL, DTN6, "ff02::1", nf.NA, nf.na_body(DTN6, DTN_MAC)),
            "NORMAL",
        ),
        "nat: NA for itself": (
            1,
            nf.nd_frame(NAT_MAC, ALL, NAT6, "ff02::1", nf.NA, nf.na_body(NAT6, NAT_MAC)),
            "NORMAL",
        ),
        "edge: RA": (2, ra("02:00:00:03:00:01"), "NORMAL"),
        "bypass: RA": (3, ra(FW_MAC), "drop"),
    }
    wrong = {what: verdict(name, port, frame) for what, (port, frame, want) in cases.items()}
    assert wrong == {what: want for what, (_, _, want) in cases.items()}
