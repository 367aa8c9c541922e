"""The controller learns a sampling switch's sFlow ifIndexes from its OVSDB (issue 41,
``ifindex: ovsdb``): on a real netdev bridge, OpenFlow port -> the port's kernel ifindex, what
OVS writes as the sample's input (tests/integration/test_sflow_agents_ovs.py sees the same)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from viplanes.detection.sflow.ifindex import OvsdbIfindexes

pytestmark = pytest.mark.integration
BRIDGE, DPID = "secnetifx0", 0x5EC0001


def _sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=20).stdout.strip()


def test_ifindexes_are_learned_from_ovsdb() -> None:
    veths = [(f"secifx{n}a", f"secifx{n}b") for n in (1, 2)]
    try:
        _sh("ovs-vsctl", "--timeout=10", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev")
        _sh("ovs-vsctl", "--timeout=10", "set", "bridge", BRIDGE, f"other-config:datapath-id={DPID:016x}")
        for n, (a, b) in enumerate(veths, start=1):
            _sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            _sh("ip", "link", "set", a, "up")
            _sh(
                "ovs-vsctl",
                "--timeout=10",
                "add-port",
                BRIDGE,
                a,
                "--",
                "set",
                "interface",
                a,
                f"ofport_request={n + 2}",
            )
        want = {n + 2: int(Path(f"/sys/class/net/{a}/ifindex").read_text()) for n, (a, _b) in enumerate(veths, start=1)}
        learned = OvsdbIfindexes({"s9": (DPID, "ovsdb")})
        got = learned.ifindexes("s9")
        assert {port: index for port, index in got.items() if port != 0xFFFE} == want  # and LOCAL
        assert learned.ifindexes("other") == {}
    finally:
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", BRIDGE], check=False, timeout=20)
        for a, _b in veths:
            subprocess.run(["ip", "link", "del", a], check=False, capture_output=True, timeout=20)
