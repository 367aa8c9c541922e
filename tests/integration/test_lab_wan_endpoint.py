"""``--endpoint``: a server of its own behind the WAN proxy (seed 003's VM), measured through the
real proxy in front of a real ``iperf3 -s`` on loopback (no Mininet: the numbers are the proxy's).
One connection gets the endpoint's own cap; four together get its NIC, not four caps."""

from __future__ import annotations

import sys

import pytest

from tests.integration.test_lab_wan_delay import free_port, iperf, running

pytestmark = pytest.mark.integration


def test_an_endpoints_connections_get_its_cap_and_share_its_nic() -> None:
    iperf_port, port = free_port(), free_port()
    server = ["iperf3", "-s", "-B", "127.0.0.1", "-p", str(iperf_port)]
    proxy = [sys.executable, "-m", "viplanes.lab.wan.proxy", "--forward", f"127.0.0.1:{port}=127.0.0.1:{iperf_port}"]
    proxy += ["--mbps", "10", "--endpoint", f"{port}=down:3,total:5"]
    with running(server, iperf_port), running(proxy, port):
        one = iperf(port, reverse=True)
        four = iperf(port, reverse=True, streams=4)
        up = iperf(port, reverse=False)  # no upload cap of its own (the proxy's 10), but the NIC's 5
    print(f"one {one:.2f}, four {four:.2f}, one up {up:.2f} Mbit/s")
    assert 0.85 * 3 <= one <= 1.1 * 3, one
    assert 0.85 * 5 <= four <= 1.1 * 5, four
    assert 0.85 * 5 <= up <= 1.1 * 5, up
