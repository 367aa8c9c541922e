"""Benchmark: a flow's first packet -> its packets riding an automatic lane, detection from the
switches, in the Mininet lab (issue 32).

The lab of tests/support/sflowlanes.py: a real ``viplanes serve`` with sFlow detection on, the
access switches s1 and s3 sampling 1 in 8, a 0.5 s rate window, a grant allowing automatic
lanes at 8 Mbit/s (the detector's threshold too). Each flow is an iperf3 upload from the DTN
(a public address: running flows through the campus NAT get no automatic lane,
docs/automatic-lanes.md) to its own cloud port, started with no lane request. Measured per flow: the client's start (wall
clock) -> the lane's ``activated_at`` (serve's wall clock, the same machine), the moment its exact
flows are on the switches and the flow's next packet takes the lane. p50/p99 over ``n`` flows.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.harness.report import Result, Target
from bench.harness.stats import summarize_ms
from bench.suite.laneflows import upload_each
from tests.support.sflowlanes import sflow_lab

FIRST_PORT, SAMPLING, WINDOW_S, RATE_MBPS = 5210, 8, 0.5, 8


def run(quick: bool = False, **_: Any) -> Result:
    n = 20 if quick else 30
    res = Result("sflow_lanes")
    with (
        tempfile.TemporaryDirectory(prefix="bench-sflow-lanes-") as tmp,
        sflow_lab(Path(tmp), RATE_MBPS, idle_s=600, sampling=SAMPLING, window_s=WINDOW_S, max_auto_lanes=n + 2) as lab,
    ):
        uploads = upload_each(lab, "dtn", FIRST_PORT, n, 4, first_cport=43000, timeout=5)
    delays = [u.delay_s for u in uploads if u.delay_s is not None]
    missed = n - len(delays)
    s = summarize_ms(delays)
    note = f"{len(delays)}/{n} flows, 1 in {SAMPLING}, {WINDOW_S} s window, {RATE_MBPS} Mbit/s threshold"
    res.add("first packet -> riding the lane p50", s.p50_ms, "ms", Target("<=", 3000.0), note)
    res.add("first packet -> riding the lane p99", s.p99_ms, "ms")
    res.details.update(n=n, missed=missed, delays_s=delays, summary=s.__dict__, sampling=SAMPLING, window_s=WINDOW_S)
    return res


if __name__ == "__main__":
    r = run(quick=True)
    print(json.dumps(r.details.get("summary"), indent=2), r.metrics)
