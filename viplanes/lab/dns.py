"""A real DNS server for the lab (dnsmasq, Debian's ``dnsmasq-base``): one name with several A and
AAAA records, as a cloud storage endpoint has.

Two instances with one record set: one inside a lab node (the cloud host, port 53 on its address)
that the lab hosts use through their own ``/etc/resolv.conf`` (a file bind-mounted in each
host's private mount namespace: Mininet's ``mnexec -n`` gives every node one, so the machine's
resolver configuration never changes), and one on 127.0.0.1 in the root namespace for the
controller (``viplanes serve`` reads ``VIPLANES_DNS_SERVER``), which cannot reach into the lab.
Both run in the foreground as children of the lab process and are stopped by ``stop()``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from viplanes.lifecycle import stop_process

TTL_S = 30


def _args(name: str, addresses: list[str], listen: str, port: int) -> list[str]:
    v4 = [a for a in addresses if ":" not in a]
    v6 = [a for a in addresses if ":" in a]
    records = [f"--host-record={name},{a}" for a in v4 + v6]
    return [
        "dnsmasq",
        "--keep-in-foreground",
        "--no-daemon",
        "-C",
        "/dev/null",
        "--no-resolv",
        "--no-hosts",
        "--pid-file=",
        f"--port={port}",
        f"--listen-address={listen}",
        "--bind-interfaces",
        f"--local-ttl={TTL_S}",
        *records,
    ]


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabDns:
    """dnsmasq serving ``name`` -> ``addresses`` in the lab and to the controller."""

    def __init__(
        self,
        lab: Any,
        name: str,
        addresses: list[str],
        server_node: str = "cloud",
        clients: tuple[str, ...] = ("desktop", "server", "dtn"),
        controller_port: int | None = None,
    ) -> None:
        self.lab, self.name, self.addresses = lab, name, addresses
        self.server_node, self.clients = server_node, clients
        self.controller_port = controller_port or free_udp_port()
        self._procs: list[Any] = []
        self._mounted: list[Any] = []
        self._dir = Path(tempfile.mkdtemp(prefix="viplanes-dns-"))

    @property
    def controller_server(self) -> str:
        """The value for ``VIPLANES_DNS_SERVER``."""
        return f"127.0.0.1:{self.controller_port}"

    def start(self) -> LabDns:
        node = self.lab.host(self.server_node)
        listen = node.IP()
        self._procs.append(
            node.popen(
                _args(self.name, self.addresses, listen, 53), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
        self._procs.append(
            subprocess.Popen(
                _args(self.name, self.addresses, "127.0.0.1", self.controller_port),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        conf = self._dir / "resolv.conf"
        conf.write_text(f"nameserver {listen}\noptions timeout:1 attempts:2\n")
        own = os.readlink("/proc/self/ns/mnt")
        for client in self.clients:
            host = self.lab.host(client)
            if host.cmd("readlink /proc/self/ns/mnt").strip() == own:
                raise RuntimeError(
                    f"{client} shares the machine's mount namespace: its resolver configuration cannot be private"
                )
            host.cmd(f"mount --bind {conf} /etc/resolv.conf")
            self._mounted.append(host)
        return self

    def stop(self) -> None:
        for host in self._mounted:
            host.cmd("umount /etc/resolv.conf")
        self._mounted.clear()
        for proc in self._procs:
            stop_process(proc)
        self._procs.clear()
