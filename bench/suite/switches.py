"""Benchmark: cost per switch count (issue 13). Synthetic campuses of 4, 32, 128 access switches.

Every lane crosses 5 switches whatever the campus (``bench/harness/synth_campus.py``), so a figure that
grows with the number of access switches is cost spent on switches the lane does not touch. Per
campus size, on real userspace OVS (one ``netdev`` bridge per switch, deleted at the end) and a
real ``viplanes serve --topology <synthetic campus>``:

1. serve's idle CPU (drift probes, echo) for a few seconds once every switch is reconciled;
2. sequential activations through the API from the host of the last access switch: p50/p99,
   the controller's part (``activation_ms``) and serve's CPU per activation (+ its release);
3. 1,000 lanes from hosts spread over the access switches, then a serve restart: reconcile
   time per switch (connected -> reconciled, from serve's log) and in total (start -> last
   switch reconciled), and the flows touched (dump before and after: must be none). The
   restarted serve listens on a new OpenFlow port and the bridges are pointed at it in one
   transaction, so they connect at once: on its old port they would come back on OVS's reconnect
   backoff (1, 2, 4, 8 s; OVS 3.1 ignores ``max_backoff`` there), which is OVS's time, not the
   reconcile's. ``BENCH_RESTART_BACKOFF=1`` restarts on the same port instead.

Then the growth from the smallest to the largest campus per figure, against the targets: serve
CPU per activation +20 % at most, restart reconcile with 1,000 lanes under 2 s.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.campus import Campus
from bench.harness.ovs import create_bridges, ovs_up
from bench.harness.pinned_ovs import affinity, pinned_ovs
from bench.harness.pinned_ovs import enabled as pinned_enabled
from bench.harness.report import RESULTS_DIR, Result, Target
from bench.harness.server import Api, CpuMeter, bench_serve, cpu_seconds, free_port, researcher, vswitchd_pid
from bench.harness.spy import Sampler
from bench.harness.stats import summarize_ms
from bench.harness.synth_campus import host_name, write_campus
from bench.harness.workload import grant_body
from bench.suite.activation import sequential_lanes
from bench.suite.scale import CONNECTED_RE, RECONCILED_RE, _stamp, dump_all, fill, log_size, untouched, wait_reconciled
from viplanes.lab.servechild import ServeChild
from viplanes.topologies.loader import load_topology

SIZES = (4, 32, 128)
QUICK_SIZES = (4, 32)
RESTART_LANES = 1000
FILL_HOSTS = 16  # lanes spread over this many access switches (one lane address each)
HOSTS_PER_ACCESS = 1
IDLE_S = 5.0
CPU_GROWTH_MAX = 0.20
RESTART_MAX_MS = 2000.0


def vswitchd_rss_mb() -> float | None:
    """Resident memory of the shared ovs-vswitchd (128 more bridges must stay affordable)."""
    pid = vswitchd_pid()
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except (OSError, TypeError):
        return None
    return None


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(access: int, probes: int, lanes: int, reconcile_timeout_s: float, profile: bool = False) -> dict[str, Any]:
    """One campus size; with BENCH_PINNED=1 on a private ovs-vswitchd (core 1), serve on core 0."""
    if not pinned_enabled():
        ovs_up()
        return _measure(access, probes, lanes, reconcile_timeout_s, profile)
    with pinned_ovs() as ovs:
        d = _measure(access, probes, lanes, reconcile_timeout_s, profile, of_host=ovs.controller_ip)
    d["pinned"] = True
    return d


def _measure(
    access: int, probes: int, lanes: int, reconcile_timeout_s: float, profile: bool = False, of_host: str = "127.0.0.1"
) -> dict[str, Any]:
    """One campus size, start to finish; bridges and work directory deleted on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix=f"viplanes-bench-switches{access}-"))
    topo_path = write_campus(workdir / "synth.yaml", access, HOSTS_PER_ACCESS)
    topo = load_topology(topo_path)
    d: dict[str, Any] = {
        "access_switches": access,
        "switches": len(topo.switches),
        "hosts": len(topo.hosts),
        "load_start": _loadavg(),
    }
    t0 = time.perf_counter()
    rss0 = vswitchd_rss_mb()
    bridges = create_bridges(topo, f"vb{os.getpid() % 10000}w", None)
    # BENCH_DECOY_ACCESS=N: as many more bridges again on the shared ovs-vswitchd, connected to
    # nothing (a control: what the same serve pays when only ovs-vswitchd has more to do)
    decoys = int(os.environ.get("BENCH_DECOY_ACCESS", "0"))
    try:
        decoy = (
            create_bridges(
                load_topology(write_campus(workdir / "decoy.yaml", decoys)), f"vb{os.getpid() % 10000}d", None
            )
            if decoys
            else None
        )
    except Exception:
        bridges.delete()
        raise
    d["decoy_access_switches"] = decoys
    d["bridges_create_s"] = time.perf_counter() - t0
    d["vswitchd_rss_mb"] = {"before": rss0, "with_bridges": vswitchd_rss_mb()}
    c = Campus(topo, bridges, workdir)
    dpids = set(bridges.names)
    serve = bench_serve(workdir, free_port(), extra_args=["--topology", str(topo_path)], of_host=of_host)
    try:
        serve.start()
        t_attach = time.perf_counter()
        mark = log_size(serve)
        bridges.connect(serve.of_port, of_host)
        lines = wait_reconciled(serve, mark, dpids, reconcile_timeout_s)
        d["first_reconcile_s"] = time.perf_counter() - t_attach
        if {x["dpid"] for x in lines} != dpids:
            raise TimeoutError(
                f"{len(dpids - {x['dpid'] for x in lines})} switches not reconciled after {reconcile_timeout_s} s"
            )
        probe_host = host_name(access - 1, 0)
        fill_hosts = sorted({host_name(k * access // FILL_HOSTS, 0) for k in range(min(FILL_HOSTS, access))})
        per_host = -(-lanes // len(fill_hosts))
        grants = [grant_body("alice", c.host_ip(h), per_host + 1) for h in fill_hosts]
        token, _ = researcher(
            serve, serve.add_operator(), "alice", [*grants, grant_body("alice", c.host_ip(probe_host), 5)]
        )
        pid = serve.proc.pid if serve.proc else 0
        time.sleep(1.0)
        idle0, w0 = cpu_seconds(pid) or 0.0, time.perf_counter()
        time.sleep(IDLE_S)
        d["serve_idle_cpu_pct"] = ((cpu_seconds(pid) or 0.0) - idle0) / (time.perf_counter() - w0) * 100
        api = Api(serve.api_port, token)
        sequential_lanes(api, c.host_ip(probe_host), 10, warmup=0, offset=5000)  # warm caches
        spy = Sampler(pid, RESULTS_DIR / f"switches{access}-probe.pyspy.txt", 120) if profile else None
        cpu = CpuMeter(pid)
        probe = sequential_lanes(api, c.host_ip(probe_host), probes, warmup=0, offset=6000)
        d["cpu_probe"] = cpu.stop()
        d["probe_py_spy"] = spy.stop() if spy else None
        api.close()
        if not probe["client_s"]:
            raise RuntimeError(f"no probe lane became active: {probe['failures'][:3]}")
        d["latency"] = summarize_ms(probe["client_s"]).as_dict()
        d["controller_part"] = summarize_ms(probe["dataplane_s"]).as_dict()
        d["release"] = summarize_ms(probe["release_s"]).as_dict()
        d["serve_cpu_ms_per_activation"] = d["cpu_probe"]["serve_cpu_s"] / len(probe["client_s"]) * 1000
        for key, value in (d["cpu_probe"].get("serve_detail") or {}).items():  # user/system, switches
            scale = 1000 if key.endswith("_s") else 1
            d[f"serve_{key.removesuffix('_s')}_per_activation"] = value / len(probe["client_s"]) * scale
        for who in ("ovs-vswitchd", "bench clients"):
            used = d["cpu_probe"].get(f"{who}_cpu_s")
            d[f"{who}_cpu_ms_per_activation"] = None if used is None else used / len(probe["client_s"]) * 1000
        d["cpus_allowed"] = {
            "serve": affinity(pid),
            "ovs-vswitchd": affinity(vswitchd_pid() or 0),
            "bench clients": affinity(os.getpid()),
        }
        d["probe_failures"] = probe["failures"][:5]
        d["fill"] = {}
        for k, host in enumerate(fill_hosts):
            got = fill(serve.api_port, token, c.host_ip(host), min(per_host, lanes - k * per_host), 2)
            d["fill"][host] = {"active": got["active"], "failures": got["failures"][:3]}
        d["lanes_active"] = sum(x["active"] for x in d["fill"].values())
        d["vswitchd_rss_mb"]["with_lanes"] = vswitchd_rss_mb()
        d["serve_rss_mb"] = serve.rss_mb()
        d["restart"] = restart(c, serve, dpids, reconcile_timeout_s)
    finally:
        serve.stop()
        d["serve_log_tail"] = serve.tail(1200)
        bridges.delete()
        if decoy is not None:
            decoy.delete()
        if not os.environ.get("BENCH_KEEP_WORKDIR"):
            shutil.rmtree(workdir, ignore_errors=True)
    d["load_end"] = _loadavg()
    return d


def restart(c: Campus, serve: ServeChild, dpids: set[int], timeout_s: float) -> dict[str, Any]:
    """Stop serve and start it on the same database and port; the bridges keep their flows."""
    before = dump_all(c)
    serve.stop()
    time.sleep(1.0)
    fresh_port = not os.environ.get("BENCH_RESTART_BACKOFF")  # =1: OVS's own reconnect schedule
    if fresh_port:
        serve.of_port = free_port()
    mark = log_size(serve)
    t0 = time.perf_counter()
    serve.start()
    if fresh_port:
        c.bridges.connect(serve.of_port, serve.of_host)
    # BENCH_SPY_RESTART=1: py-spy the restarted serve until every switch is reconciled
    spy = (
        Sampler(serve.proc.pid, RESULTS_DIR / f"switches{len(dpids)}-restart.pyspy.txt", timeout_s, 250)
        if os.environ.get("BENCH_SPY_RESTART") and serve.proc
        else None
    )
    lines = wait_reconciled(serve, mark, dpids, timeout_s)
    if spy is not None:
        spy.stop()
    got = {x["dpid"] for x in lines}
    process_ms = (max((x["seen_at"] for x in lines), default=time.perf_counter()) - t0) * 1000
    time.sleep(0.5)
    same = untouched(before, dump_all(c))
    done = got >= dpids
    return {
        "slowest_switch_ms": max((x["ms"] for x in lines), default=None) if done else None,
        "total_ms": round_ms(serve.log.read_text(errors="replace")[mark:]) if done else None,
        "start_to_last_ms": process_ms,
        "missing": len(dpids - got),
        "work_ms_max": max((x["work_ms"] or 0 for x in lines), default=None),
        "flows": same["flows"],
        "untouched": same["ok"],
        "touched": {
            d: {k: u[k] for k in ("missing", "added", "reset")}
            for d, u in same["per_switch"].items()
            if u["missing"] or u["added"] or u["reset"]
        },
    }


def round_ms(log_text: str) -> float | None:
    """First "switch connected" to last "reconciled" in serve's log: the whole round."""
    connected = [_stamp(m.group(1)) for m in CONNECTED_RE.finditer(log_text)]
    reconciled = [_stamp(m.group(1)) for m in RECONCILED_RE.finditer(log_text)]
    if not connected or not reconciled:
        return None
    return (max(reconciled) - min(connected)) * 1000


def _growth(first: float | None, last: float | None) -> float | None:
    return None if first in (None, 0) or last is None else (last - first) / first


def run(quick: bool = False, profile: bool = False, **_: Any) -> Result:
    sizes = QUICK_SIZES if quick else SIZES
    if os.environ.get("BENCH_SWITCHES"):
        sizes = tuple(int(x) for x in os.environ["BENCH_SWITCHES"].split(","))
    probes = 30 if quick else 100
    res = Result("switches")
    runs: dict[int, dict[str, Any]] = {}
    for n in sizes:
        try:
            runs[n] = measure(n, probes, RESTART_LANES, reconcile_timeout_s=600.0, profile=profile)
        except Exception as exc:
            runs[n] = {"error": f"{exc.__class__.__name__}: {exc}"}
    res.details = {
        "sizes": list(sizes),
        "runs": runs,
        "hosts_per_access": HOSTS_PER_ACCESS,
        "lanes": RESTART_LANES,
        "probes": probes,
        "pinned": pinned_enabled(),
    }
    figures = [
        ("activation p50", lambda r: r["latency"]["p50_ms"], "ms", None),
        ("activation p99", lambda r: r["latency"]["p99_ms"], "ms", None),
        ("controller part p50", lambda r: r["controller_part"]["p50_ms"], "ms", None),
        ("serve CPU per activation+release", lambda r: r["serve_cpu_ms_per_activation"], "ms", "cpu"),
        ("serve user CPU per activation+release", lambda r: r.get("serve_user_per_activation"), "ms", None),
        ("serve system CPU per activation+release", lambda r: r.get("serve_sys_per_activation"), "ms", None),
        (
            "serve voluntary context switches per activation+release",
            lambda r: r.get("serve_voluntary_cs_per_activation"),
            "",
            None,
        ),
        (
            "serve involuntary context switches per activation+release",
            lambda r: r.get("serve_involuntary_cs_per_activation"),
            "",
            None,
        ),
        ("serve idle CPU", lambda r: r["serve_idle_cpu_pct"], "%", None),
        ("ovs-vswitchd CPU per activation+release", lambda r: r["ovs-vswitchd_cpu_ms_per_activation"], "ms", None),
        ("bench clients CPU per activation+release", lambda r: r["bench clients_cpu_ms_per_activation"], "ms", None),
        (
            f"restart reconcile, {RESTART_LANES} lanes, slowest switch",
            lambda r: r["restart"]["slowest_switch_ms"],
            "ms",
            "restart",
        ),
        (
            f"restart reconcile, {RESTART_LANES} lanes, all switches",
            lambda r: r["restart"]["total_ms"],
            "ms",
            "restart",
        ),
        (
            "flows touched by the restart reconcile",
            lambda r: sum(sum(v.values()) for v in r["restart"]["touched"].values()),
            "",
            "zero",
        ),
    ]
    for label, get, unit, kind in figures:
        values: dict[int, float | None] = {}
        for n, r in runs.items():
            try:
                values[n] = None if "error" in r else get(r)
            except (KeyError, TypeError, ZeroDivisionError):
                values[n] = None
        first, last = values.get(sizes[0]), values.get(sizes[-1])
        growth = _growth(first, last)
        steps = ", ".join(f"{n}: {'-' if v is None else f'{v:.3g}'}" for n, v in values.items())
        note = f"{steps}; growth {sizes[0]}->{sizes[-1]} " + ("n/a" if growth is None else f"{growth * 100:+.0f} %")
        target = None
        if kind == "cpu":
            res.add(
                f"{label}: growth {sizes[0]}->{sizes[-1]} access switches",
                None if growth is None else growth * 100,
                "%",
                Target("<=", CPU_GROWTH_MAX * 100),
                note=steps,
            )
            continue
        if kind == "restart":
            target = Target("<=", RESTART_MAX_MS)
        if kind == "zero":
            target = Target("<=", 0)
        res.add(f"{label} at {sizes[-1]}", last, unit, target, note=note)
    errors = [f"{n}: {r['error']}" for n, r in runs.items() if "error" in r]
    if errors:
        res.error = "; ".join(errors)
    return res
