"""Benchmark: a scitags firefly -> the automatic lane active on real userspace OVS (issue 32).

A real ``viplanes serve`` with its firefly listener on, the campus bridges attached, the DTN's
grant allowing automatic lanes on fireflies. The fireflies come from a private network namespace
holding the DTN's address (a veth to the root namespace, so the listener sees the DTN as the
sender, as it would on a campus); each flow gets its own source port, one firefly every
``gap_s``. Measured: the firefly's send time (the sender's clock) -> the lane's ``activated_at``
(serve's steady clock, the same machine's wall clock), p50/p99 over ``n`` flows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.harness.campus import campus
from bench.harness.report import Result, Target
from bench.harness.server import Api, bench_serve, free_port, researcher
from bench.harness.stats import summarize_ms

DST, PORT = "203.0.113.10", 5201
SENDER = """
import json, socket, sys, time
target, port, src, n, gap, dst, dport = sys.argv[1:8]
port, n, gap, dport = int(port), int(n), float(gap), int(dport)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent = []
for i in range(n):
    doc = {"version": 1, "flow-lifecycle": {"state": "start"},
           "flow-id": {"afi": "ipv4", "src-ip": src, "dst-ip": dst, "protocol": "tcp",
                       "src-port": 50000 + i, "dst-port": dport},
           "context": {"experiment-id": 3, "activity-id": 1}}
    t = time.time()
    s.sendto(b"<134>1 - dtn bench - firefly-json - " + json.dumps(doc).encode(), (target, port))
    sent.append(t)
    time.sleep(gap)
print(json.dumps(sent))
"""


@contextmanager
def sender_namespace(src: str) -> Iterator[tuple[str, str]]:
    """A namespace holding ``src``, a veth to the root namespace: (namespace, listener address)."""
    tag = f"vbff{os.getpid() % 10000}"
    root, inner, target = f"{tag}r", f"{tag}h", "169.254.90.1"
    subprocess.run(["ip", "netns", "add", tag], check=True)
    try:
        cmds = [
            ["ip", "link", "add", root, "type", "veth", "peer", "name", inner, "netns", tag],
            ["ip", "addr", "add", f"{target}/32", "dev", root],
            ["ip", "link", "set", root, "up"],
            ["ip", "route", "add", f"{src}/32", "dev", root],
            ["ip", "-n", tag, "addr", "add", f"{src}/32", "dev", inner],
            ["ip", "-n", tag, "link", "set", inner, "up"],
            ["ip", "-n", tag, "route", "add", f"{target}/32", "dev", inner, "src", src],
        ]
        for cmd in cmds:
            subprocess.run(cmd, check=True)
        yield tag, target
    finally:
        subprocess.run(["ip", "link", "del", root], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "del", tag], check=False)


def _ts(iso: str) -> float:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run(quick: bool = False, **_: Any) -> Result:
    n = 20 if quick else 50
    res = Result("fireflies")
    ff_port = free_port()
    os.environ["VIPLANES_FIREFLY_PORT"] = str(ff_port)
    try:
        with campus("fireflies") as c:
            src = c.host_ip("dtn")
            serve = bench_serve(c.workdir, free_port()).start()
            try:
                c.attach(serve)
                op = serve.add_operator()
                grant = {
                    "src_prefixes": [f"{src}/32"],
                    "dst_prefixes": ["203.0.113.0/24"],
                    "protocols": ["tcp"],
                    "ports": [str(PORT)],
                    "max_duration_s": 3600,
                    "max_lanes": n + 10,
                }
                token, (gid,) = researcher(serve, op, "dtnuser", [grant])
                ops = Api(serve.api_port, op)
                policy = {"enabled": True, "fireflies": True, "max_auto_lanes": n + 10, "idle_s": 600}
                ops.ok("PUT", f"/api/v1/grants/{gid}/auto", policy)
                time.sleep(1.5)  # the acceptor's grant index refreshes every second
                with sender_namespace(src) as (ns, target):
                    out = subprocess.run(
                        [
                            "ip",
                            "netns",
                            "exec",
                            ns,
                            "python3",
                            "-c",
                            SENDER,
                            target,
                            str(ff_port),
                            src,
                            str(n),
                            "0.2",
                            DST,
                            str(PORT),
                        ],
                        capture_output=True,
                        text=True,
                        timeout=120,
                        check=True,
                    )
                sent = json.loads(out.stdout)
                api = Api(serve.api_port, token)
                deadline = time.monotonic() + 10
                lanes: dict[int, dict] = {}
                while len(lanes) < n and time.monotonic() < deadline:
                    for lane in api.ok("GET", f"/api/v1/lanes?src_ip={src}&limit=500"):
                        if lane["state"] == "active" and lane["activated_at"]:
                            lanes[lane["src_port"] - 50000] = lane
                    time.sleep(0.2)
                delays = [_ts(lanes[i]["activated_at"]) - sent[i] for i in range(n) if i in lanes]
                api.close()
                ops.close()
            finally:
                serve.stop()
    finally:
        os.environ.pop("VIPLANES_FIREFLY_PORT", None)
    s = summarize_ms(delays)
    res.add("firefly -> lane p50", s.p50_ms, "ms", Target("<=", 500.0), f"{len(delays)}/{n} flows")
    res.add("firefly -> lane p99", s.p99_ms, "ms")
    res.details.update(n=n, laned=len(delays), delays_s=delays, summary=s.__dict__)
    return res


if __name__ == "__main__":
    r = run(quick=True)
    print(json.dumps(r.details.get("summary"), indent=2), r.metrics)
