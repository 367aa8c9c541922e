"""What a busy neighbour vCPU does to the CPU time of the same controller work.

    .venv/bin/python -m bench.probes.neighbour --n 1500 --rounds 5

The switches bench sees serve's CPU per activation grow from 4 to 128 access switches while
the controller's own work stays flat in-process (``bench.probes.profile_switches``) and the calls of
one request are equal (``tests/unit/api/test_switch_count.py``); what does grow is
ovs-vswitchd, which at 140 bridges keeps one of this VM's two vCPUs busy. This measures that
effect alone: the in-process activation + release cycle of ``bench.probes.profile_switches`` (4 access
switches, no sockets), pinned to CPU 0, timed in process CPU time, while CPU 1 is

* ``idle``: nothing started;
* ``spin``: a Python loop that only computes (registers and L1);
* ``stream``: a process that copies a 64 MiB buffer over and over (memory bandwidth, caches).

Conditions alternate within each round so drift hits all of them alike. Prints the best and
median CPU per cycle per condition and each busy condition's increase over ``idle``. The
same instructions are run in every condition: any increase is the machine (a shared physical
core or caches under the two vCPUs), not the controller. Needs two CPUs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.probes.profile_switches import cpu_per_cycle_ms, runtime_for

WORK_CPU = 0
NEIGHBOUR_CPU = 1


def _spin(stop: Any) -> None:
    os.sched_setaffinity(0, {NEIGHBOUR_CPU})
    x = 0
    while not stop.is_set():
        for i in range(100_000):
            x = (x * 31 + i) & 0xFFFF


def _stream(stop: Any) -> None:
    os.sched_setaffinity(0, {NEIGHBOUR_CPU})
    src = bytearray(64 << 20)
    dst = bytearray(64 << 20)
    while not stop.is_set():
        dst[:] = src


NEIGHBOURS: dict[str, Callable[[Any], None] | None] = {"idle": None, "spin": _spin, "stream": _stream}


def measure(kind: str, rt: Any, n: int, first_id: int) -> float:
    """CPU ms per cycle on CPU 0 with the given neighbour running on CPU 1."""
    target = NEIGHBOURS[kind]
    stop = mp.Event()
    proc = mp.Process(target=target, args=(stop,), daemon=True) if target else None
    if proc:
        proc.start()
        time.sleep(0.3)  # the neighbour is running before the clock starts
    try:
        return cpu_per_cycle_ms(rt, 4, n, first_id)
    finally:
        if proc:
            stop.set()
            proc.join(5)
            if proc.is_alive():
                proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1500, help="cycles per condition and round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("bench.probes.neighbour: needs two CPUs")
    mp.set_start_method("fork")
    os.sched_setaffinity(0, {WORK_CPU})
    rt = runtime_for(4)
    cpu_per_cycle_ms(rt, 4, 300, 1)  # warm-up
    samples: dict[str, list[float]] = {k: [] for k in NEIGHBOURS}
    load0 = os.getloadavg()
    next_id = 1000
    for r in range(args.rounds):
        order = list(NEIGHBOURS) if r % 2 == 0 else list(reversed(NEIGHBOURS))
        for kind in order:
            samples[kind].append(measure(kind, rt, args.n, next_id))
            next_id += args.n
    best = {k: min(v) for k, v in samples.items()}
    median = {k: statistics.median(v) for k, v in samples.items()}
    out = {
        "cpu_ms_per_cycle_best": best,
        "cpu_ms_per_cycle_median": median,
        "increase_over_idle_pct": {
            k: {
                "best": round((best[k] / best["idle"] - 1) * 100, 1),
                "median": round((median[k] / median["idle"] - 1) * 100, 1),
            }
            for k in NEIGHBOURS
            if k != "idle"
        },
        "samples": samples,
        "load_start": load0,
        "load_end": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
