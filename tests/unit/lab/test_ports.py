"""free_port picks below the kernel's ephemeral range, so no outgoing connection's source port
takes a listener's port before it binds; and never the same port twice in one process."""

from __future__ import annotations

import socket
from pathlib import Path

from viplanes.lab.ports import HIGH, LOW, free_port


def test_ports_come_from_below_the_ephemeral_range_and_are_bindable() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports), "a port handed out twice"
    assert all(LOW <= p <= HIGH < low for p in ports), [p for p in ports if p >= low]
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))
