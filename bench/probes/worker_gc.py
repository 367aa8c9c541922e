"""What the API worker's startup heap costs in full collections, with and without the freeze.

    .venv/bin/python -m bench.probes.worker_gc --cycles 3000

Builds the app as ``viplanes api``'s worker does (``create_app`` on a fresh SQLite database; the
in-memory data plane instead of the controllers, so only the API process is measured), then runs
activation + release cycles through the Flask test client and records every collection the
cyclic GC makes (``gc.callbacks``). Each mode runs in its own process so neither inherits the
other's heap:

* ``thawed``: the heap as it was before ``api_node.worker_app`` froze it;
* ``frozen``: ``gc.collect(); gc.freeze()`` after ``create_app``, as the worker does now.

Prints per mode: objects the collector tracks after the build, collections per generation and
their total and longest time, and the mean wall time per cycle.
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from typing import Any

GRANT: dict[str, Any] = {
    "src_prefixes": ["10.1.0.0/24"],
    "dst_prefixes": ["203.0.113.0/24"],
    "protocols": ["tcp"],
    "ports": ["9000-9100"],
    "max_duration_s": 3600,
    "max_lanes": 3,
}


def run_mode(mode: str, cycles: int) -> dict[str, Any]:
    from tests.support.apps import make_app
    from viplanes.cli.serve import load_topology_option
    from viplanes.dataplane.memory import MemoryDataplane
    from viplanes.store import records as store

    url = f"sqlite:///{tempfile.mkdtemp()}/worker_gc.db"
    app = make_app({"db_url": url}, dataplane=MemoryDataplane(), topology=load_topology_option(None))
    db = app.extensions["viplanes"].db
    with db.write() as s:
        store.create_principal(s, "root", "operator", time.time())
        token = store.create_principal(s, "alice", "researcher", time.time())[1]
        store.create_grant(s, store.GrantInput(principal="alice", **GRANT), "root", time.time())
    if mode == "frozen":
        gc.collect()
        gc.freeze()
    tracked = len(gc.get_objects())
    count = [0, 0, 0]
    total = [0.0, 0.0, 0.0]
    longest = [0.0, 0.0, 0.0]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
            return
        g, took = info["generation"], time.perf_counter() - started[0]
        count[g] += 1
        total[g] += took
        longest[g] = max(longest[g], took)

    client = app.test_client()
    head = {"Authorization": f"Bearer {token}"}
    body = {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 600,
        "purpose": "worker gc bench",
    }
    gc.callbacks.append(on_gc)
    t0 = time.perf_counter()
    for _ in range(cycles):
        r = client.post("/api/v1/lanes", json=body, headers=head)
        if r.status_code != 201:
            raise SystemExit(f"activation answered {r.status_code}: {r.get_json()}")
        r = client.post(f"/api/v1/lanes/{r.get_json()['id']}/release", headers=head)
        if r.status_code >= 300:
            raise SystemExit(f"release answered {r.status_code}: {r.get_json()}")
    wall = time.perf_counter() - t0
    gc.callbacks.remove(on_gc)
    return {
        "mode": mode,
        "tracked": tracked,
        "collections": count,
        "ms": [round(t * 1000, 1) for t in total],
        "longest_ms": [round(t * 1000, 1) for t in longest],
        "cycle_ms": round(wall / cycles * 1000, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cycles", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2, help="each round runs both modes, order alternating")
    ap.add_argument("--mode", choices=["thawed", "frozen"], help=argparse.SUPPRESS)  # one child
    args = ap.parse_args()
    if args.mode:
        print(json.dumps(run_mode(args.mode, args.cycles)))
        return
    print(
        f"{'mode':8} {'tracked':>8} {'gen0/1/2 collections':>22} {'gen2 total ms':>14} "
        f"{'gen2 longest ms':>16} {'ms/cycle':>9}"
    )
    modes = ("thawed", "frozen")
    for i in range(args.rounds):
        mode_order = modes if i % 2 == 0 else modes[::-1]  # drift hits both alike
        for mode in mode_order:
            print_mode(mode, args.cycles)


def print_mode(mode: str, cycles: int) -> None:
    """One mode in a fresh process, one table row."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.probes.worker_gc", "--mode", mode, "--cycles", str(cycles)],
        capture_output=True,
        text=True,
        check=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"{mode:8} {r['tracked']:>8} {'/'.join(map(str, r['collections'])):>22} "
        f"{r['ms'][2]:>14} {r['longest_ms'][2]:>16} {r['cycle_ms']:>9}",
        flush=True,
    )


if __name__ == "__main__":
    main()
