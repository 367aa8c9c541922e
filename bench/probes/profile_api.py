"""Profile ``POST /api/v1/lanes`` + release through the real Flask app (test client, in-memory
data plane, SQLite file): where the northbound CPU goes, without HTTP sockets or switches.

    .venv/bin/python -m bench.probes.profile_api --requests 300
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)

    from bench.harness.workload import flows, grant_body, lane_body
    from tests.support.apps import make_app
    from viplanes.config import AppConfig
    from viplanes.dataplane.memory import MemoryDataplane
    from viplanes.store import records as store

    with tempfile.TemporaryDirectory(prefix="viplanes-profile-api-") as tmp:
        app = make_app(AppConfig(db_url=f"sqlite:///{Path(tmp) / 'api.db'}"), dataplane=MemoryDataplane())
        ctx = app.extensions["viplanes"]
        src = str(ctx.topology.host("desktop").iface.ip.ip)
        with ctx.db.write() as s:
            now = time.time()
            store.create_principal(s, "alice", "researcher", now)
            _, token = store.create_principal(s, "alice2", "researcher", now)
            store.create_grant(s, store.GrantInput(**grant_body("alice2", src, 5)), "bench", now)
        client = app.test_client()
        headers = {"Authorization": f"Bearer {token}"}

        def cycle(n: int, offset: int) -> None:
            for flow in flows(n, offset):
                r = client.post("/api/v1/lanes", json=lane_body(src, flow), headers=headers)
                assert r.status_code == 201 and r.json["state"] == "active", r.json
                r2 = client.post(f"/api/v1/lanes/{r.json['id']}/release", headers=headers)
                assert r2.status_code == 200, r2.json

        cycle(20, 0)  # warm caches (SQLAlchemy statement cache, schema compilation)
        t0 = time.perf_counter()
        cycle(args.requests, 100)
        plain = (time.perf_counter() - t0) / args.requests
        cpu = cpu_per_call(client, headers, src, args.requests, 500)
        print(
            f"CPU per call (process_time, no profiler, {args.requests} each): "
            f"request p50 {cpu['request'][0]:.3f} ms mean {cpu['request'][1]:.3f} ms, "
            f"release p50 {cpu['release'][0]:.3f} ms mean {cpu['release'][1]:.3f} ms"
        )
        prof = cProfile.Profile()
        prof.runcall(cycle, args.requests, 1000)
        print(f"request+release through Flask: {plain * 1000:.2f} ms per cycle (no profiler)")
        stats = pstats.Stats(prof)
        by_package: dict[str, float] = defaultdict(float)
        total = 0.0
        for (filename, _, _), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
            total += tottime
            by_package[_package(filename)] += tottime
        print("self time by package:")
        for pkg, t in sorted(by_package.items(), key=lambda kv: -kv[1])[:14]:
            print(f"  {t / total * 100:5.1f}%  {pkg}")
        stats.sort_stats("cumulative").print_stats(args.top)
        ctx.db.dispose()


def cpu_per_call(client, headers: dict[str, str], src: str, n: int, offset: int) -> dict[str, tuple[float, float]]:  # type: ignore[no-untyped-def]
    """(p50, mean) CPU milliseconds of this process per request and per release."""
    from bench.harness.workload import flows, lane_body

    req: list[float] = []
    rel: list[float] = []
    for flow in flows(n, offset):
        c0 = time.process_time()
        r = client.post("/api/v1/lanes", json=lane_body(src, flow), headers=headers)
        c1 = time.process_time()
        client.post(f"/api/v1/lanes/{r.json['id']}/release", headers=headers)
        c2 = time.process_time()
        req.append((c1 - c0) * 1000)
        rel.append((c2 - c1) * 1000)
    return {k: (sorted(v)[len(v) // 2], sum(v) / len(v)) for k, v in (("request", req), ("release", rel))}


REPO = str(Path(__file__).resolve().parents[2]) + "/"


def _package(filename: str) -> str:
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if filename.startswith(REPO):
        return "viplanes:" + filename[len(REPO) :].split("/", 1)[0]
    if filename.startswith("<"):
        return "builtins"
    return "stdlib"


if __name__ == "__main__":
    main()
