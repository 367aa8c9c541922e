"""A free local TCP port: the one helper the lab, the tests and the benchmarks pick ports with."""

from __future__ import annotations

import random
import socket
import threading
from collections import deque

# Below Linux's default ephemeral range (32768-60999): a port the kernel picks from that range can
# be handed, before its listener binds it, to any outgoing connection on the machine as its source
# port (CI, two test workers: "OpenFlow listener 127.0.0.1:33823: Address already in use").
LOW, HIGH = 20000, 32767
_recent: deque[int] = deque(maxlen=2048)  # never handed out twice while its first taker starts
_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now, at random below the ephemeral range; a caller that loses
    the race to another process retries (``ServeChild.start`` does once)."""
    with _lock:
        for _ in range(500):
            port = random.randint(LOW, HIGH)
            if port in _recent:
                continue
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
            _recent.append(port)
            return port
    with socket.socket() as s:  # a crowded range: the kernel's pick, as before
        s.bind((host, 0))
        return int(s.getsockname()[1])
