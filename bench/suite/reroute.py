"""Benchmark: one failed link carrying N lanes (1,000 by default) -> every lane re-routed, its
flows on the switches of the other link (issue 42).

The redundant campus (topologies/campus-redundant.yaml) on userspace OVS bridges (internal ports,
the declared links' ports set up), a real ``viplanes serve`` on it. N desktop lanes (NAT'd, three
switches) ride the first of the two parallel s2-s3 bypass links (s2:3-s3:3). The border's end of
that link is set administratively down (``ovs-ofctl mod-port BR PORT down``: the switch's own
port-status report, as a pulled cable gives). One ``ovs-ofctl monitor`` per bridge of the link
(bench/harness/flowwatch.py) timestamps every flow change; measured from the mod-port to the
moment every lane has a flow through the other link (s2:4-s3:5) on both s2 and s3 (a new flow, or
one rewritten in place); then ``dump-flows`` is polled until no lane's flow uses the cut link (an
upper bound: each poll takes tens of milliseconds). A final dump counts what the switches hold.

The switches are declared without fast-failover groups (a copy of the campus with
``fast_failover: false``): this measures the controller's re-route, what every switch without
groups relies on. With groups the switches move a lane by themselves before the controller hears
of it (tests/integration/test_link_failover.py measures that: tens of milliseconds).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.harness.campus import Campus
from bench.harness.flowwatch import FlowWatch
from bench.harness.ovs import create_bridges, ofctl, ovs_up
from bench.harness.report import Result, Target
from bench.harness.server import REPO, Api, bench_serve, free_port, researcher
from bench.harness.workload import grant_body
from bench.suite.scale import fill
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.topologies.loader import load_topology

TOPOLOGY = REPO / "topologies" / "campus-redundant.yaml"
SRC = "desktop"
CUT = {"s2": 3, "s3": 3}  # bypass link a, s2:3-s3:3: the lanes' first choice; its s3 end is cut
OTHER = {"s2": 4, "s3": 5}  # bypass link b, s2:4-s3:5
WAIT_S = 60.0  # a re-route not complete by then is reported as such


def port_name(bridge: str, port: int) -> str:
    return f"{bridge}p{port}"[:15]  # as bench.harness.ovs.create_bridges names them


def _port_re(bridge: str, port: int) -> re.Pattern[str]:
    """A flow line that reads or writes ``port`` (by number or by name)."""
    name = re.escape(port_name(bridge, port))
    return re.compile(rf"(?:in_port=|output:)(?:{port}|\"?{name}\"?)(?![0-9a-z])")


@contextmanager
def redundant_campus() -> Iterator[Campus]:
    """The redundant campus's bridges, their link ports up; deleted on exit. No packet crosses
    between bridges (nothing here needs one): the controller learns link state from port-status,
    and OVS sends none for a patch port (``mod-port`` leaves its config 0)."""
    ovs_up()
    topo = load_topology(TOPOLOGY)
    bridges = create_bridges(topo, f"vb{os.getpid() % 10000}r", None)
    workdir = Path(tempfile.mkdtemp(prefix="viplanes-bench-reroute-"))
    try:
        by_switch = {sw.name: bridges.names[sw.dpid] for sw in topo.switches}
        for link in topo.links:  # internal ports start administratively down; links start up
            for end in (link.a, link.b):
                ofctl("mod-port", by_switch[end.switch], port_name(by_switch[end.switch], end.port), "up")
        yield Campus(topo, bridges, workdir)
    finally:
        bridges.delete()
        if not os.environ.get("BENCH_KEEP_WORKDIR"):
            shutil.rmtree(workdir, ignore_errors=True)


def _covered(watch: FlowWatch, dpid: int, pattern: re.Pattern[str], cookies: set[int], since: float) -> float | None:
    """When every cookie had an added or modified flow matching ``pattern`` on ``dpid``, or None."""
    left = set(cookies)
    for t, ev in list(watch.events[dpid]):
        if t < since or ev.kind not in ("ADDED", "MODIFIED") or ev.cookie not in left:
            continue
        if pattern.search(ev.text):
            left.discard(ev.cookie)
            if not left:
                return t
    return None


def _through(bridge: str, pattern: re.Pattern[str], cookies: set[int]) -> dict[int, int]:
    """cookie -> flows of these cookies on ``bridge`` that read or write the port of ``pattern``."""
    out: dict[int, int] = {}
    for line in ofctl("dump-flows", bridge).splitlines():
        m = re.search(r"cookie=(0x[0-9a-f]+)", line)
        if m and int(m.group(1), 16) in cookies and pattern.search(line):
            out[int(m.group(1), 16)] = out.get(int(m.group(1), 16), 0) + 1
    return out


def no_groups(workdir: Path) -> Path:
    """The campus with every switch declared without fast-failover groups."""
    data = yaml.safe_load(TOPOLOGY.read_text())
    for sw in data["switches"]:
        sw["features"] = {**sw.get("features", {}), "fast_failover": False}
    out = Path(workdir) / "campus-redundant-no-ff.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def measure(c: Campus, n: int) -> dict[str, Any]:
    names = {sw.name: c.bridges.names[sw.dpid] for sw in c.topo.switches}
    dpids = {sw.name: sw.dpid for sw in c.topo.switches}
    serve = bench_serve(c.workdir, free_port(), extra_args=["--topology", str(no_groups(c.workdir))]).start()
    try:
        c.attach(serve)
        token, _ = researcher(serve, serve.add_operator(), "alice", [grant_body("alice", c.host_ip(SRC), n + 10)])
        filled = fill(serve.api_port, token, c.host_ip(SRC), n, clients=4)
        api = Api(serve.api_port, token)
        rows = api.ok("GET", f"/api/v1/lanes?state=active&limit={min(n, 1000)}")
        api.close()
        cookies = {lane_cookie(int(row["id"])) for row in rows}
        old = {sw: _port_re(names[sw], p) for sw, p in CUT.items()}
        new = {sw: _port_re(names[sw], p) for sw, p in OTHER.items()}
        before = {sw: _through(names[sw], old[sw], cookies) for sw in CUT}
        if len(before["s2"]) < len(cookies) or len(before["s3"]) < len(cookies):
            raise RuntimeError(
                f"before the cut only {len(before['s2'])}/{len(before['s3'])} of {len(cookies)} lanes ride s2:3-s3:3"
            )
        with FlowWatch({dpids[sw]: names[sw] for sw in CUT}) as watch:
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            ofctl("mod-port", names["s3"], port_name(names["s3"], CUT["s3"]), "down")
            added = None
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline and added is None:
                time.sleep(0.05)
                times = [_covered(watch, dpids[sw], new[sw], cookies, t0) for sw in OTHER]
                added = max(times) if all(t is not None for t in times) else None  # type: ignore[type-var]
            cleared = None  # by dump-flows polls, so an upper bound (each dump takes tens of ms)
            while time.monotonic() < deadline and added is not None:
                if not any(_through(names[sw], old[sw], cookies) for sw in CUT):
                    cleared = time.perf_counter()
                    break
                time.sleep(0.1)
            events = {sw: len(watch.events[dpids[sw]]) for sw in CUT}
        after_new = {sw: len(_through(names[sw], new[sw], cookies)) for sw in OTHER}
        after_old = {sw: len(_through(names[sw], old[sw], cookies)) for sw in CUT}
        return {
            "lanes": len(cookies),
            "fill": {k: v for k, v in filled.items() if k != "failures"},
            "fill_failures": filled["failures"][:5],
            "new_paths_s": None if added is None else added - t0,
            "old_paths_gone_by_s": None if cleared is None else cleared - t0,
            "lanes_on_other_link_after": after_new,
            "lanes_on_cut_link_after": after_old,
            "monitor_events": events,
            "load_1min_at_cut": load,
            "serve_rss_mb": serve.rss_mb(),
        }
    finally:
        serve.stop()


def run(quick: bool = False, reroute_lanes: int | None = None, **_: Any) -> Result:
    n = reroute_lanes or (200 if quick else 1000)
    res = Result("reroute")
    with redundant_campus() as c:
        out = measure(c, n)
    note = f"{out['lanes']} lanes, load {out['load_1min_at_cut']:.1f} at the cut"
    res.add(
        "link down -> every lane's flows on the other link", _ms(out["new_paths_s"]), "ms", Target("<=", 1000), note
    )
    res.add("link down -> no lane's flow on the cut link (polled)", _ms(out["old_paths_gone_by_s"]), "ms")
    if out["lanes"] < n:
        res.error = f"only {out['lanes']} of {n} lanes active: {out['fill_failures']}"
    elif out["new_paths_s"] is None:
        res.error = f"not every lane re-routed within {WAIT_S} s: {out['lanes_on_other_link_after']}"
    res.details.update(out)
    return res


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


if __name__ == "__main__":
    import sys

    r = run(reroute_lanes=int(sys.argv[1]) if len(sys.argv) > 1 else None)
    print(
        json.dumps({"metrics": [m.__dict__ for m in r.metrics], "error": r.error, **r.details}, indent=2, default=str)
    )
