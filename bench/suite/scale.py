"""Benchmark 3: 10,000 active lanes.

1. Probe: latency of desktop lanes (3 switches, NAT) one after another with no other lane active.
2. Fill: N lanes from the DTN (no NAT, so the /27 lane pool is no limit) through the API with a
   few concurrent clients.
3. Controller memory (RSS of ``viplanes serve``) before and after; flows per switch.
4. Probe again with N lanes active: "one more lane" vs the first.
5. Controller restart: stop serve, start it on the same database and OpenFlow port; the bridges
   reconnect and the controller reconciles. Flows are dumped before and after: same cookies,
   matches and priorities, and no duration went down (a re-added flow restarts at 0).
6. Switch reconnect: every bridge loses its controller connection and gets it back (see
   ``reconnect`` for why not ``del-controller``); same checks.

Reconcile times come from the controller's own log lines; wall times from the outside are
reported too.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from typing import Any

from bench.harness.campus import Campus, campus
from bench.harness.ovs import compare_dumps, dump_flows, flow_count
from bench.harness.pg import database
from bench.harness.report import RESULTS_DIR, Result, Target
from bench.harness.server import Api, CpuMeter, bench_serve, free_port, researcher
from bench.harness.spy import Sampler
from bench.harness.stats import summarize_ms, within
from bench.harness.workload import flows, grant_body, lane_body
from bench.suite.activation import run_floor, sequential_lanes
from viplanes.lab.servechild import ServeChild

BULK_SRC = "dtn"
PROBE_SRC = "desktop"
FILL_CLIENTS = 4
MAX_GRANT_LANES = 10_000  # the API's bound on one grant's max_lanes

# serve's log lines (asctime has millisecond resolution):
#   "2026-11-22 00:12:35,123 viplanes.controller INFO switch connected dpid=3"
#   "2026-11-22 00:12:35,601 viplanes.controller.runtime.lane_runtime INFO reconciled switch s3 (dpid 3): kept ..."
STAMP = r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) "
CONNECTED_RE = re.compile(STAMP + r".*switch connected dpid=(\d+)", re.M)
RECONCILED_RE = re.compile(STAMP + r".*reconciled .*?dpid[ =](\d+)\)?:?(.*)$", re.M)


def fill(api_port: int, token: str, src_ip: str, n: int, clients: int) -> dict[str, Any]:
    """Request ``n`` lanes split over ``clients`` threads; lanes stay active."""
    failures: list[str] = []
    done = [0] * clients
    per = (n + clients - 1) // clients

    def work(k: int) -> None:
        api = Api(api_port, token)
        count = min(per, n - k * per)
        for flow in flows(max(0, count), k * per):
            status, lane = api.call("POST", "/api/v1/lanes", lane_body(src_ip, flow, duration_s=3600))
            if status == 201 and lane.get("state") == "active":
                done[k] += 1
            elif len(failures) < 50:
                failures.append(
                    f"{status} {lane.get('error') or lane.get('state')}: {lane.get('message') or lane.get('reason')}"
                )
        api.close()

    t0 = time.perf_counter()
    threads = [threading.Thread(target=work, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - t0
    return {"active": sum(done), "seconds": took, "per_s": sum(done) / took if took else None, "failures": failures}


def floor_with_cpu(c: Campus, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Floor latency and what ``ovs-vswitchd`` spent per floor lane (activation + removal)."""
    cpu = CpuMeter(None)
    out = run_floor(c, n)
    used = cpu.stop()
    lanes = n + 10  # the floor's warm-up lanes count too
    used["ovs-vswitchd_ms_per_lane"] = (used["ovs-vswitchd_cpu_s"] or 0) / lanes * 1000
    return summarize_ms(out["latency_s"]).as_dict(), used


def dump_all(c: Campus) -> dict[int, list[Any]]:
    return {dpid: dump_flows(name) for dpid, name in c.bridges.names.items()}


def untouched(before: dict[int, list[Any]], after: dict[int, list[Any]]) -> dict[str, Any]:
    per = {dpid: compare_dumps(before[dpid], after[dpid]) for dpid in before}
    return {
        "ok": all(u.ok for u in per.values()),
        "per_switch": {d: vars(u) for d, u in per.items()},
        "flows": sum(u.after for u in per.values()),
    }


def _stamp(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def reconcile_lines(log_text: str) -> list[dict[str, Any]]:
    """Per dpid: milliseconds from "switch connected" to "reconciled" (the first of each), and
    the controller's own "in X ms (after Y ms waiting ...)" when it logs them."""
    connected: dict[int, float] = {}
    for m in CONNECTED_RE.finditer(log_text):
        connected.setdefault(int(m.group(2)), _stamp(m.group(1)))
    out: dict[int, dict[str, Any]] = {}
    for m in RECONCILED_RE.finditer(log_text):
        dpid = int(m.group(2))
        if dpid in connected and dpid not in out:
            plan = m.group(3).strip()
            own = re.search(r"in ([\d.]+) ms \((?:after )?([\d.]+) ms (?:of it )?waiting", plan)
            out[dpid] = {
                "dpid": dpid,
                "ms": (_stamp(m.group(1)) - connected[dpid]) * 1000.0,
                "work_ms": float(own.group(1)) if own else None,
                "waited_ms": float(own.group(2)) if own else None,
                "plan": plan,
            }
    return list(out.values())


def wait_reconciled(serve: ServeChild, since_chars: int, dpids: set[int], timeout_s: float) -> list[dict[str, Any]]:
    """Reconcile lines the controller logged after offset ``since_chars``, one per dpid."""
    deadline = time.monotonic() + timeout_s
    seen: dict[int, dict[str, Any]] = {}
    while time.monotonic() < deadline:
        text = serve.log.read_text(errors="replace")[since_chars:]
        for line in reconcile_lines(text):
            seen.setdefault(line["dpid"], {**line, "seen_at": time.perf_counter()})
        if dpids <= set(seen):
            return list(seen.values())
        time.sleep(0.02)
    return list(seen.values())


def log_size(serve: ServeChild) -> int:
    try:
        return len(serve.log.read_text(errors="replace"))
    except OSError:
        return 0


def run(
    quick: bool = False,
    lanes: int | None = None,
    dataplane: str = "openflow",
    profile: bool = False,
    db: str = "sqlite",
    **_: Any,
) -> Result:
    n = lanes if lanes is not None else (500 if quick else 10_000)
    probes = 20 if quick else 100
    res = Result("scale")
    d: dict[str, Any] = {"lanes": n, "bulk_source": BULK_SRC, "probe_source": PROBE_SRC, "probes": probes, "db": db}
    with campus("scale") as c, database(db, c.workdir) as db_url:
        if dataplane == "openflow":
            d["floor_empty"], d["cpu_floor_empty"] = floor_with_cpu(c, probes)
        serve = bench_serve(c.workdir, free_port(), dataplane=dataplane, db_url=db_url).start()
        try:
            c.attach(serve)
            dpids = set(c.bridges.names)
            bulk = [
                grant_body("alice", c.host_ip(BULK_SRC), min(MAX_GRANT_LANES, n - k))
                for k in range(0, n, MAX_GRANT_LANES)
            ]
            token, _ = researcher(
                serve, serve.add_operator(), "alice", [*bulk, grant_body("alice", c.host_ip(PROBE_SRC), 5)]
            )
            probe_api = Api(serve.api_port, token)
            d["rss_mb_empty"] = serve.rss_mb()
            cpu = CpuMeter(serve.proc.pid if serve.proc else None)
            time.sleep(2.0)  # the controller's start-up work (warm-up, first reconcile) is over
            first = sequential_lanes(probe_api, c.host_ip(PROBE_SRC), probes, warmup=20)
            d["cpu_probe_empty"] = cpu.stop()
            d["fill"] = fill(serve.api_port, token, c.host_ip(BULK_SRC), n, FILL_CLIENTS)
            d["rss_mb_full"] = serve.rss_mb()
            d["flows_per_switch"] = {dpid: flow_count(name) for dpid, name in c.bridges.names.items()}
            spy = (
                Sampler(serve.proc.pid, RESULTS_DIR / "scale-probe.pyspy.txt", 120) if profile and serve.proc else None
            )
            cpu = CpuMeter(serve.proc.pid if serve.proc else None)
            more = sequential_lanes(probe_api, c.host_ip(PROBE_SRC), probes, warmup=20, offset=probes + 20)
            d["cpu_probe_full"] = cpu.stop()
            d["probe_py_spy"] = spy.stop() if spy else None
            probe_api.close()
            if dataplane == "openflow":
                d["controller_restart"] = restart(c, serve, dpids, profile)
                d["switch_reconnect"] = reconnect(c, serve, dpids, profile)
            d["rss_mb_end"] = serve.rss_mb()
        finally:
            serve.stop()
        if dataplane == "openflow":  # the same switches, now holding every lane's flows
            d["floor_full"], d["cpu_floor_full"] = floor_with_cpu(c, probes)
    d["serve_log_tail"] = serve.tail(1500)
    res.details = d
    if not first["client_s"] or not more["client_s"]:
        res.error = f"probe lanes failed: {(first['failures'] + more['failures'])[:3]}"
        return res
    s0, s1 = summarize_ms(first["client_s"]), summarize_ms(more["client_s"])
    d["latency_empty"], d["latency_full"] = s0.as_dict(), s1.as_dict()
    for key, run_ in (("controller_part_empty", first), ("controller_part_full", more)):
        d[key] = summarize_ms(run_["dataplane_s"]).as_dict() if run_["dataplane_s"] else None
    res.add("active lanes", float(d["fill"]["active"]), "", Target(">=", n))
    res.add("fill rate", d["fill"]["per_s"], "/s", note=f"{FILL_CLIENTS} clients")
    res.add("serve RSS", d["rss_mb_full"], "MiB", note=f"empty {d['rss_mb_empty']:.0f} MiB")
    res.add("lane p50 at 0", s0.p50_ms, "ms")
    res.add(f"lane p50 at {n}", s1.p50_ms, "ms", Target("<=", round(s0.p50_ms * 1.2, 2)))
    if d.get("controller_part_empty") and d.get("controller_part_full"):
        res.add(
            f"controller part p50 at 0 / at {n}",
            d["controller_part_full"]["p50_ms"],
            "ms",
            note=f"at 0: {d['controller_part_empty']['p50_ms']:.2f} ms",
        )
    for key, label in (("cpu_probe_empty", "at 0"), ("cpu_probe_full", f"at {n}")):
        c_ = d.get(key) or {}
        if c_.get("ovs-vswitchd_cpu_s") is not None and c_.get("wall_s"):
            res.add(
                f"ovs-vswitchd busy during probes {label}",
                c_["ovs-vswitchd_cpu_s"] / c_["wall_s"] * 100,
                "%",
                note="shared with every bridge on the machine",
            )
    if d.get("floor_empty") and d.get("floor_full"):
        res.add(f"floor p50 at {n}", d["floor_full"]["p50_ms"], "ms", note=f"at 0: {d['floor_empty']['p50_ms']:.2f} ms")
        res.add(
            f"ovs-vswitchd CPU per floor lane at {n}",
            d["cpu_floor_full"]["ovs-vswitchd_ms_per_lane"],
            "ms",
            note=f"at 0: {d['cpu_floor_empty']['ovs-vswitchd_ms_per_lane']:.2f} ms; includes process start",
        )
    d["within_20_percent"] = within(s1.p50_ms, s0.p50_ms, 0.2)
    for key, label in (("controller_restart", "controller restart"), ("switch_reconnect", "switch reconnect")):
        r = d.get(key)
        if not r:
            continue
        res.add(f"reconcile after {label}", r.get("reconcile_max_ms"), "ms", Target("<=", 2000), note="slowest switch")
        res.add(
            f"flows untouched after {label}",
            1.0 if r["untouched"]["ok"] else 0.0,
            "",
            Target(">=", 1),
            note=f"{r['untouched']['flows']} flows",
        )
    return res


def restart(c: Campus, serve: ServeChild, dpids: set[int], profile: bool = False) -> dict[str, Any]:
    """Stop serve and start it again; bridges keep their flows (fail_mode=secure) meanwhile."""
    before = dump_all(c)
    serve.stop()
    time.sleep(1.0)
    mark = log_size(serve)
    t0 = time.perf_counter()
    serve.start()
    healthy = time.perf_counter() - t0
    spy = Sampler(serve.proc.pid, RESULTS_DIR / "scale-restart.pyspy.txt", 120) if profile and serve.proc else None
    lines = wait_reconciled(serve, mark, dpids, 120.0)
    spied = spy.stop() if spy else None
    wall = max((x["seen_at"] for x in lines), default=time.perf_counter()) - t0
    time.sleep(0.5)
    after = dump_all(c)
    return _reconcile_result(
        lines, dpids, before, after, {"healthy_after_s": healthy, "reconciled_after_start_s": wall, "py_spy": spied}
    )


def reconnect(c: Campus, serve: ServeChild, dpids: set[int], profile: bool = False) -> dict[str, Any]:
    """Break every bridge's controller connection and restore it, keeping the flows.

    Not ``del-controller``: OVS flushes a bridge's flows whenever it goes from having a controller
    to having none (or back), fail_mode=secure or not. Pointing the bridge at a port where nobody
    listens drops the connection the way a network fault would, with the flows left in place.
    """
    before = dump_all(c)
    mark = log_size(serve)
    c.bridges.connect(free_port())  # nobody listens there
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = serve.log.read_text(errors="replace")[mark:]
        if len(set(re.findall(r"switch disconnected dpid=(\d+)", text))) >= len(dpids):
            break
        time.sleep(0.05)
    mark = log_size(serve)
    t0 = time.perf_counter()
    spy = Sampler(serve.proc.pid, RESULTS_DIR / "scale-reconnect.pyspy.txt", 120) if profile and serve.proc else None
    c.bridges.connect(serve.of_port)
    lines = wait_reconciled(serve, mark, dpids, 120.0)
    spied = spy.stop() if spy else None
    wall = max((x["seen_at"] for x in lines), default=time.perf_counter()) - t0
    time.sleep(0.5)
    after = dump_all(c)
    return _reconcile_result(lines, dpids, before, after, {"reconciled_after_set_controller_s": wall, "py_spy": spied})


def _reconcile_result(
    lines: list[dict[str, Any]], dpids: set[int], before: Any, after: Any, extra: dict[str, Any]
) -> dict[str, Any]:
    got = {x["dpid"] for x in lines}
    return {
        **extra,
        "reconcile_lines": lines,
        "missing_dpids": sorted(dpids - got),
        "reconcile_max_ms": max((x["ms"] for x in lines), default=None) if got >= dpids else None,
        "untouched": untouched(before, after),
    }
