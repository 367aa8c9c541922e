"""Benchmark 4: policy decisions per second with 10,000 grants.

Three views of the same decision (``policy.rules.decide``):
- pure, 10,000 grants spread over 1,000 principals (10 each): what one request really checks;
- pure, worst case: one principal holding all 10,000 grants, the request matching only the last;
- through the store (SQLite file): load the principal's grants, count its live lanes, decide, in
  one read transaction — the decision part of ``POST /lanes`` without HTTP and without a switch.
"""

from __future__ import annotations

import ipaddress
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.report import Result
from bench.harness.stats import summarize_ms
from viplanes.policy.rules import GrantRule, LaneRequest, decide

GRANTS = 10_000
PER_PRINCIPAL = 10
SRC = ipaddress.IPv4Address("10.1.0.10")  # the campus desktop


def dst_net(j: int) -> ipaddress.IPv4Network:
    """A distinct /24 beyond the campus for grant ``j`` (11.0.0.0/24, 11.0.1.0/24, ...)."""
    return ipaddress.IPv4Network((int(ipaddress.IPv4Address("11.0.0.0")) + (j << 8), 24))


def rule(j: int) -> GrantRule:
    return GrantRule(
        grant_id=j + 1,
        src_prefixes=(ipaddress.IPv4Network("10.1.0.0/24"),),
        dst_prefixes=(dst_net(j),),
        protocols=frozenset({"tcp"}),
        ports=((9000, 9999),),
        max_duration_s=7200,
        max_rate_mbps=None,
        max_lanes=100,
    )


def request_for(j: int, now: float) -> LaneRequest:
    return LaneRequest(
        src_ip=SRC,
        dst_ip=dst_net(j).network_address + 5,
        protocol="tcp",
        dst_port=9100,
        src_port=None,
        duration_s=600,
        starts_at=now,
        rate_mbps=None,
    )


def rate(fn: Callable[[int], Any], seconds: float) -> tuple[float, list[float]]:
    """Calls per second of ``fn(i)`` over about ``seconds``; also per-call latencies."""
    lat: list[float] = []
    i = 0
    t_end = time.perf_counter() + seconds
    start = time.perf_counter()
    while time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - t0)
        i += 1
    return i / (time.perf_counter() - start), lat


def pure(topo: Any, seconds: float) -> dict[str, Any]:
    now = time.time()
    rules = [rule(j) for j in range(GRANTS)]
    by_principal = [rules[p * PER_PRINCIPAL : (p + 1) * PER_PRINCIPAL] for p in range(GRANTS // PER_PRINCIPAL)]
    reqs = [request_for(j, now) for j in range(GRANTS)]

    def spread(i: int) -> None:
        j = i % GRANTS
        d = decide(reqs[j], by_principal[j // PER_PRINCIPAL], topo, now, {})
        assert d.allowed, d

    def worst(i: int) -> None:
        d = decide(reqs[GRANTS - 1], rules, topo, now, {})
        assert d.allowed, d

    spread_rate, spread_lat = rate(spread, seconds)
    worst_rate, worst_lat = rate(worst, seconds)
    return {
        "spread_per_s": spread_rate,
        "spread": summarize_ms(spread_lat).as_dict(),
        "worst_per_s": worst_rate,
        "worst": summarize_ms(worst_lat).as_dict(),
    }


def through_store(topo: Any, seconds: float) -> dict[str, Any]:
    from viplanes.store import records as store
    from viplanes.store.db import Database
    from viplanes.store.lanesql.core import live_counts

    with tempfile.TemporaryDirectory(prefix="viplanes-bench-policy-") as tmp:
        db = Database(f"sqlite:///{Path(tmp) / 'policy.db'}")
        db.create_all()
        now = time.time()
        t0 = time.perf_counter()
        principal_ids = []
        with db.write() as s:
            for p in range(GRANTS // PER_PRINCIPAL):
                pr, _ = store.create_principal(s, f"r{p}", "researcher", now)
                principal_ids.append(pr.id)
                for j in range(p * PER_PRINCIPAL, (p + 1) * PER_PRINCIPAL):
                    net = dst_net(j)
                    store.create_grant(
                        s,
                        store.GrantInput(
                            principal=f"r{p}",
                            src_prefixes=["10.1.0.0/24"],
                            dst_prefixes=[str(net)],
                            protocols=["tcp"],
                            ports=["9000-9999"],
                            max_duration_s=7200,
                            max_lanes=100,
                        ),
                        "bench",
                        now,
                    )
        fill_s = time.perf_counter() - t0

        def one(i: int) -> None:
            j = i % GRANTS
            pid = principal_ids[j // PER_PRINCIPAL]
            req = request_for(j, time.time())
            with db.read() as s:
                grants = store.lock_usable_grants(s, pid, req.starts_at, for_update=False)
                counts = live_counts(s.connection(), [g.id for g in grants], req.starts_at, req.expires_at)
                d = decide(req, [store.rule_of(g) for g in grants], topo, req.starts_at, counts)
            assert d.allowed, d

        per_s, lat = rate(one, seconds)
        db.dispose()
    return {"per_s": per_s, "latency": summarize_ms(lat).as_dict(), "fill_s": fill_s}


def run(quick: bool = False, **_: Any) -> Result:
    from viplanes.api.app import default_topology

    topo = default_topology()
    seconds = 1.0 if quick else 5.0
    res = Result("policy")
    p = pure(topo, seconds)
    st = through_store(topo, seconds)
    res.add("decisions/s, pure", p["spread_per_s"], "/s", note="10 of 10,000 grants per principal")
    res.add("decisions/s, pure worst case", p["worst_per_s"], "/s", note="one principal, 10,000 grants")
    res.add("decisions/s, via store", st["per_s"], "/s", note="SQLite read txn")
    res.add("via store p99", st["latency"]["p99_ms"], "ms")
    res.details = {
        "grants": GRANTS,
        "grants_per_principal": PER_PRINCIPAL,
        "pure": p,
        "store": st,
        "seconds_each": seconds,
    }
    return res
