"""Which of serve's threads spends the CPU that grows with the switch count (issue 13).

``python -m bench.probes.switch_threads [4,128] [--probes 60] [--idle 10]``: per campus size (the
synthetic campus of ``bench.suite.switches`` on the shared ovs-vswitchd, or the private pinned one with
BENCH_PINNED=1), serve's CPU split per thread over

1. an idle phase (every switch reconciled, no request): background CPU per second;
2. sequential activations + releases through the API: CPU per cycle.

Threads are named from one ``py-spy dump`` (the OS does not know Python's thread names): the
thread's name and its outermost Python function, grouped (``recv`` = one switch connection's read
loop, ``echo`` its echo loop, ``send`` its send loop, ``api server`` cheroot's HTTP threads...). CPU per
thread comes from ``/proc/<pid>/task/<tid>/schedstat`` (ns), context switches from ``status``.
``perf stat`` software counters (task-clock, context switches) over the activation phase go
beside them; this VM exposes no hardware counters (instructions/cycles: "not supported").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus
from bench.harness.ovs import create_bridges, ovs_up
from bench.harness.pinned_ovs import enabled as pinned_enabled
from bench.harness.pinned_ovs import pinned_ovs
from bench.harness.server import Api, bench_serve, free_port, researcher
from bench.harness.spy import py_spy
from bench.harness.synth_campus import host_name, write_campus
from bench.harness.workload import grant_body
from bench.suite.activation import sequential_lanes
from bench.suite.scale import log_size, wait_reconciled
from viplanes.topologies.loader import load_topology

_THREAD = re.compile(r'^Thread (?:0x[0-9A-Fa-f]+ )?\(?(\d+)\)? .*?"?([^"\n]*)"?$')
_GROUPS = (
    ("_recv_loop", "switch recv"),
    ("_echo_request_loop", "switch echo"),
    ("send_loop", "switch send"),
    ("check_drift", "drift"),
    ("_every", "periodic"),
    ("cheroot", "api server"),
    ("scheduler", "scheduler"),
    ("serve_forever", "of accept"),
    ("_event_loop", "os-ken event"),
    ("Timer", "timer"),
    ("reconcile", "reconcile"),
)


def thread_names(pid: int) -> dict[int, str]:
    """tid -> a group name, from one py-spy dump (every thread's stack, outermost frame last)."""
    exe = py_spy()
    if exe is None:
        return {}
    out = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=60).stdout
    names: dict[int, str] = {}
    for block in re.split(r"\n(?=Thread )", out):
        head = block.splitlines()[0] if block.strip() else ""
        m = re.match(r"Thread (\d+)", head) or re.match(r"Thread 0x[0-9A-Fa-f]+ \((\d+)\)", head)
        if not m:
            continue
        tid = int(m.group(1))
        label = head.split('"')[1] if head.count('"') >= 2 else "?"
        group = next((g for key, g in _GROUPS if key in block), None)
        names[tid] = group or label
    return names


def thread_cpu(pid: int) -> dict[int, tuple[int, int]]:
    """tid -> (CPU ns, voluntary + involuntary context switches)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            ns = int((task / "schedstat").read_text().split()[0])
            cs = sum(
                int(line.split()[1])
                for line in (task / "status").read_text().splitlines()
                if line.endswith("ctxt_switches") or "ctxt_switches:" in line
            )
        except (OSError, ValueError, IndexError):
            continue
        out[int(task.name)] = (ns, cs)
    return out


def split(
    before: dict[int, tuple[int, int]], after: dict[int, tuple[int, int]], names: dict[int, str]
) -> dict[str, dict[str, float]]:
    """group -> {cpu_ms, switches (context), threads} between two snapshots."""
    groups: dict[str, dict[str, float]] = defaultdict(lambda: {"cpu_ms": 0.0, "ctx": 0, "threads": 0})
    for tid, (ns, cs) in after.items():
        ns0, cs0 = before.get(tid, (0, 0))
        g = groups[names.get(tid, "new/unknown")]
        g["cpu_ms"] += (ns - ns0) / 1e6
        g["ctx"] += cs - cs0
        g["threads"] += 1
    return dict(sorted(groups.items(), key=lambda kv: -kv[1]["cpu_ms"]))


def perf_stat(pid: int) -> subprocess.Popen | None:
    if shutil.which("perf") is None:
        return None
    return subprocess.Popen(
        ["perf", "stat", "-x", ",", "-e", "task-clock,context-switches,cpu-migrations,page-faults", "-p", str(pid)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def perf_stop(proc: subprocess.Popen | None) -> dict[str, float]:
    if proc is None:
        return {}
    proc.send_signal(2)
    _, err = proc.communicate(timeout=30)
    out = {}
    for line in err.splitlines():
        parts = line.split(",")
        if len(parts) > 3 and parts[0].replace(".", "").isdigit():
            out[parts[2]] = float(parts[0])
    return out


def _spy(pid: int, out: Path, seconds: float) -> None:
    """``py-spy record`` (idle threads left out, native frames in) for ``seconds``."""
    exe = py_spy()
    if exe is not None:
        subprocess.run(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(int(seconds)),
                "--rate",
                "200",
                "--format",
                "raw",
                "--threads",
                "--nonblocking",
                "--output",
                str(out),
            ],
            capture_output=True,
            timeout=seconds + 60,
        )


def measure(
    access: int, probes: int, idle_s: float, spy_dir: Path | None = None, repo: Path | None = None
) -> dict[str, Any]:
    if not pinned_enabled():
        ovs_up()
        return _measure(access, probes, idle_s, spy_dir=spy_dir, repo=repo)
    with pinned_ovs() as ovs:
        return _measure(access, probes, idle_s, of_host=ovs.controller_ip, spy_dir=spy_dir, repo=repo)


def _measure(
    access: int,
    probes: int,
    idle_s: float,
    of_host: str = "127.0.0.1",
    spy_dir: Path | None = None,
    repo: Path | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix=f"viplanes-bench-threads{access}-"))
    topo_path = write_campus(workdir / "synth.yaml", access, 1)
    topo = load_topology(topo_path)
    bridges = create_bridges(topo, f"vt{os.getpid() % 10000}w", None)
    c = Campus(topo, bridges, workdir)
    serve = bench_serve(workdir, free_port(), extra_args=["--topology", str(topo_path)], of_host=of_host, repo=repo)
    d: dict[str, Any] = {
        "access": access,
        "switches": len(topo.switches),
        "repo": str(repo or "."),
        "pinned": pinned_enabled(),
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    try:
        serve.start()
        mark = log_size(serve)
        bridges.connect(serve.of_port, of_host)
        wait_reconciled(serve, mark, set(bridges.names), 600.0)
        probe_host = host_name(access - 1, 0)
        token, _ = researcher(serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(probe_host), 5)])
        pid = serve.proc.pid if serve.proc else 0
        api = Api(serve.api_port, token)
        sequential_lanes(api, c.host_ip(probe_host), 10, warmup=0, offset=5000)
        time.sleep(3.0)
        names = thread_names(pid)
        s0, w0 = thread_cpu(pid), time.perf_counter()
        time.sleep(idle_s)
        s1, w1 = thread_cpu(pid), time.perf_counter()
        idle = split(s0, s1, names)
        d["idle_s"] = w1 - w0
        d["idle_ms_per_s"] = {k: round(v["cpu_ms"] / (w1 - w0), 3) for k, v in idle.items()}
        d["idle_ctx_per_s"] = {k: round(v["ctx"] / (w1 - w0), 1) for k, v in idle.items()}
        if spy_dir is not None:  # py-spy samples of the idle phase, after the CPU was measured
            _spy(pid, spy_dir / f"idle{access}.txt", idle_s)
        d["threads"] = {k: v["threads"] for k, v in idle.items()}
        perf = perf_stat(pid)
        time.sleep(0.3)
        s2, w2 = thread_cpu(pid), time.perf_counter()
        probe = sequential_lanes(api, c.host_ip(probe_host), probes, warmup=0, offset=6000)
        s3, w3 = thread_cpu(pid), time.perf_counter()
        d["perf"] = perf_stop(perf)
        n = len(probe["client_s"]) or 1
        act = split(s2, s3, names)
        d["cycles"] = len(probe["client_s"])
        d["cycle_wall_ms"] = (w3 - w2) / n * 1000
        d["cpu_ms_per_cycle"] = {k: round(v["cpu_ms"] / n, 3) for k, v in act.items()}
        d["ctx_per_cycle"] = {k: round(v["ctx"] / n, 1) for k, v in act.items()}
        d["total_ms_per_cycle"] = sum(v["cpu_ms"] for v in act.values()) / n
        d["idle_total_ms_per_s"] = sum(v["cpu_ms"] for v in idle.values()) / (w1 - w0)
        d["background_share_ms_per_cycle"] = d["idle_total_ms_per_s"] * d["cycle_wall_ms"] / 1000
        api.close()
    finally:
        serve.stop()
        bridges.delete()
        shutil.rmtree(workdir, ignore_errors=True)
    d["load_end"] = [round(x, 2) for x in os.getloadavg()]
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sizes", nargs="?", default="4,128")
    ap.add_argument("--probes", type=int, default=60)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--spy", type=Path, help="directory for py-spy samples of the idle phase")
    ap.add_argument("--repo", type=Path, help="serve from this checkout (with its own .venv): A/B")
    args = ap.parse_args()
    if args.spy:
        args.spy.mkdir(parents=True, exist_ok=True)
    runs = [measure(int(n), args.probes, args.idle, args.spy, args.repo) for n in args.sizes.split(",")]
    text = json.dumps(runs, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
