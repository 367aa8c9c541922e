"""Fireflies from lab hosts to a `viplanes serve` in the root namespace, their source address kept.

The controller cannot reach into the lab (docs/dataplane.md), so each sending host gets a veth
pair to the root namespace: the host routes one link-local /32 (the listener's address on that
link) over it with its own campus address as source, and the root end routes that campus /32 back
(reverse-path filtering). Deleting the root end removes both ends and the routes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.runtag import ifname, link_octet, run_tag

HEADER = "<134>1 - {host} flowd - firefly-json - "


def firefly_json(state: str, src: str, dst: str, sport: int, dport: int, experiment: int = 3) -> str:
    return json.dumps(
        {
            "version": 1,
            "flow-lifecycle": {"state": state},
            "flow-id": {
                "afi": "ipv4",
                "src-ip": src,
                "dst-ip": dst,
                "protocol": "tcp",
                "src-port": sport,
                "dst-port": dport,
            },
            "context": {"experiment-id": experiment, "activity-id": 1},
        }
    )


@contextmanager
def firefly_links(net: Any, hosts: dict[str, str]) -> Iterator[dict[str, str]]:
    """{host name: campus address} -> {host name: listener address to send to}."""
    made: list[str] = []
    targets: dict[str, str] = {}
    # addresses and routes in the root namespace, where another run may route the same campus
    # addresses: this run's own 169.254.X and its own route metric, so neither "File exists"
    octet, metric = link_octet(), int(run_tag(), 36) % 60000 + 1000
    try:
        for i, (name, addr) in enumerate(sorted(hosts.items())):
            root, inner = ifname("ff", f"r{i}"), ifname("ff", f"h{i}")  # the run's own names
            target = f"169.254.{octet}.{1 + i}"
            host = net.host(name)
            subprocess.run(["ip", "link", "add", root, "type", "veth", "peer", "name", inner], check=True, timeout=30)
            made.append(root)
            subprocess.run(["ip", "link", "set", inner, "netns", str(host.pid)], check=True, timeout=30)
            subprocess.run(["ip", "addr", "add", f"{target}/32", "dev", root], check=True, timeout=30)
            subprocess.run(["ip", "link", "set", root, "up"], check=True, timeout=30)
            route = ["ip", "route", "add", f"{addr}/32", "dev", root, "metric", str(metric)]
            subprocess.run(route, check=True, timeout=30)
            host.cmd(f"timeout 30 sh -c 'ip link set {inner} up && ip route add {target}/32 dev {inner} src {addr}'")
            targets[name] = target
        yield targets
    finally:
        for root in made:
            subprocess.run(["ip", "link", "del", root], check=False, timeout=30)


def send_firefly(net: Any, host: str, target: str, port: int, payload: str) -> float:
    """Send one firefly from ``host``; the wall-clock time it left (printed by the sender)."""
    script = (
        "import socket,sys,time;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);"
        f"t=time.time();s.sendto(sys.stdin.buffer.read(),({target!r},{port}));print(t)"
    )
    out = net.host(host).popen(["python3", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    sent, _ = out.communicate(HEADER.format(host=host) + payload, timeout=10)
    return float(sent.strip().splitlines()[-1])
