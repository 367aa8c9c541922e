"""The per-flow loop the Mininet lane benches share (sflow_lanes, nat_takeover): one iperf3
upload per cloud port, started with no lane request, and the lane it got (or None)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.support.sflowlanes import SflowLab, stop_all, timestamp


@dataclass(frozen=True)
class Upload:
    started: float  # the client's start, wall clock (serve's ``activated_at`` is on the same machine)
    lane: dict | None

    @property
    def delay_s(self) -> float | None:
        """Upload start -> the lane active: the moment its next packet takes the lane."""
        return None if self.lane is None else timestamp(self.lane["activated_at"]) - self.started


def upload_each(
    lab: SflowLab, host: str, first_port: int, n: int, seconds: float, first_cport: int, timeout: float
) -> list[Upload]:
    """``n`` uploads from ``host``, one after another, each to its own port from its own port."""
    out = []
    for i in range(n):
        port = first_port + i
        servers = lab.servers(port)
        try:
            started = time.time()
            client = lab.upload(host, port, seconds, cport=first_cport + i)
            lane = lab.lane_of(port, timeout=timeout)
            stop_all([client])
        finally:
            stop_all(servers)
        out.append(Upload(started, lane))
    return out
