"""A free local TCP port: the one helper the lab, the tests and the benchmarks pick ports with."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick); a caller that loses the race to another
    process retries (``ServeChild.start`` does once)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
