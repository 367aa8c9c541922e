"""Benchmark: a NAT'd flow's first packet -> its packets riding its takeover lane, in the Mininet
lab (issue 32, "Taking over a running NAT'd connection" in docs/automatic-lanes.md).

The lab of tests/support/sflowlanes.py (a real ``viplanes serve``, sFlow 1 in 8 at s1 and s3, a
0.5 s window, a grant allowing automatic lanes at 8 Mbit/s). Each flow is an iperf3 upload from
the desktop (10.1.0.10, behind the firewall and the NAT box) to its own cloud port, started with
no lane request: the acceptor pairs its pre-NAT sighting with the post-NAT one, proves the
mapping with the DSCP-nonce watch (0.8 s), and the takeover lane rewrites the exact tuple at the
border. Measured per flow: the client's start (wall clock) -> the lane's ``activated_at`` (serve's
wall clock, the same machine), the moment its flows are on the switches and the connection's next
packet takes the lane; and the watch's share (``nat_watch_ms``). p50/p99 over ``n`` flows, the
acceptor's outcomes (``nat_unconfirmed`` ...), and ``--serve-log FILE`` keeps serve's log (each
watch's readings: "NAT watch drained"). ``--help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.harness.report import Result, Target
from bench.harness.stats import summarize_ms
from bench.suite.laneflows import upload_each
from tests.support.natlab import outcomes
from tests.support.sflowlanes import sflow_lab

FIRST_PORT, SAMPLING, WINDOW_S, RATE_MBPS = 5240, 8, 0.5, 8


def run(
    quick: bool = False,
    threshold_mbps: float | None = None,
    flows: int | None = None,
    serve_log: Path | None = None,
    **_: Any,
) -> Result:
    """``threshold_mbps``: the detector's threshold when below the grant's rate (issue 44);
    ``flows``: how many uploads (20 quick, else 24); ``serve_log``: where to keep serve's log."""
    n = flows or (20 if quick else 24)
    res = Result("nat_takeover")
    with (
        tempfile.TemporaryDirectory(prefix="bench-nat-takeover-") as tmp,
        sflow_lab(
            Path(tmp), RATE_MBPS, 600, SAMPLING, WINDOW_S, max_auto_lanes=n + 2, threshold_mbps=threshold_mbps
        ) as lab,
    ):
        uploads = upload_each(lab, "desktop", FIRST_PORT, n, 5, first_cport=44000, timeout=6)
        refusals = outcomes(lab)  # the acceptor's counters: nat_rate_mismatch, nat_unconfirmed, ...
        if serve_log is not None:
            shutil.copyfile(lab.serve.log, serve_log)
    taken = [u for u in uploads if u.lane is not None and "nat_port" in u.lane["trigger"]]
    delays = [u.delay_s for u in taken if u.delay_s is not None]
    watches = [float(u.lane["trigger"]["nat_watch_ms"]) / 1000 for u in taken if u.lane is not None]
    missed = n - len(taken)
    s, w = summarize_ms(delays), summarize_ms(watches)
    note = f"{len(delays)}/{n} flows through the NAT, 1 in {SAMPLING}, {WINDOW_S} s window, 0.8 s watch"
    res.add("NAT'd first packet -> riding the takeover lane p50", s.p50_ms, "ms", Target("<=", 3000.0), note)
    res.add("NAT'd first packet -> riding the takeover lane p99", s.p99_ms, "ms", Target("<=", 3000.0))
    res.add("of which the watch (mark, proof, sweep) p50", w.p50_ms, "ms")
    res.details.update(
        n=n, missed=missed, outcomes=refusals, delays_s=delays, watch_s=watches, summary=s.__dict__, watch=w.__dict__
    )
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="NAT'd upload start -> its takeover lane active, in the lab")
    ap.add_argument("--flows", type=int, default=24, help="uploads, one after another (default 24)")
    ap.add_argument("--threshold-mbps", type=float, help="detector threshold (default: the grant's 8)")
    ap.add_argument("--serve-log", type=Path, help="copy serve's log here (the watches' readings)")
    args = ap.parse_args(argv)
    load = os.getloadavg()
    r = run(flows=args.flows, threshold_mbps=args.threshold_mbps, serve_log=args.serve_log)
    d = r.details
    print(json.dumps({k: d[k] for k in ("n", "missed", "outcomes", "summary", "watch")}, indent=1))
    s = d["summary"]
    print(
        f"{len(d['delays_s'])}/{d['n']} taken over; p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms,"
        f" max {s['max_ms']:.0f} ms; load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
