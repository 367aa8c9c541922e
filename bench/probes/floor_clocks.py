"""How transport and clock move the floor: ``python -m bench.probes.floor_clocks --rounds 2 --n 60``.

Runs the watched floor (:func:`bench.suite.activation.run_floor` with a FlowWatch) over plain TCP and
over TLS in alternation on the same bridges, and prints for each the barrier clock and the peers'
clock (send -> visible on all bridges; release: send -> gone), p50/p99 in ms, one JSON per round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from bench.harness.campus import campus
from bench.harness.flowwatch import FlowWatch
from bench.harness.stats import summarize_ms
from bench.harness.workload import flows
from bench.suite.activation import run_floor
from bench.suite.peers import lane_messages


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=60)
    args = ap.parse_args(argv)
    with campus("fclock") as c:
        lane_dpids = sorted(lane_messages(c, 1, next(flows(1))))
        with FlowWatch({d: c.bridges.names[d] for d in lane_dpids}) as watch:
            for r in range(args.rounds):
                order = ("tcp", "ssl") if r % 2 == 0 else ("ssl", "tcp")
                for transport in order:
                    out = run_floor(c, args.n, transport=transport, watch=watch)
                    row = {
                        "round": r,
                        "transport": transport,
                        "load": os.getloadavg()[0],
                        "missed": len(out["watch_missed"]),
                    }
                    for key, samples in (
                        ("add_barrier", out["latency_s"]),
                        ("add_visible", out["visible_s"]),
                        ("del_barrier", out["removal_s"]),
                        ("del_gone", out["gone_s"]),
                    ):
                        s = summarize_ms(samples)
                        row[key] = [round(s.p50_ms, 3), round(s.p99_ms, 3)]
                    print(json.dumps(row), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
