"""``viplanes`` CLI with experimental patches applied first, to measure a proposed change before
proposing it: ``BENCH_PATCH=sqlite_writer_lock python -m bench.serve_patched serve ...``.

Patches (comma-separated in $BENCH_PATCH):
- ``sqlite_writer_lock``: SQLite write transactions queue on one in-process lock instead of
  SQLite's busy handler, which sleeps 1, 2, 5, 10 ... 100 ms between retries of BEGIN IMMEDIATE.
- ``switch_interval``: ``sys.setswitchinterval(0.0005)`` (the default since controller/openflow/launcher.py sets it;
  kept for A/B runs against older checkouts).
- ``lazy_quota``: count live lanes only for the grants that pass every other check.
- ``desired_columns``: ``desired_lanes`` as a plain column query.
- ``one_write_per_switch``: the app sends each switch's batch as one buffer.
- ``token_cache``: token -> principal remembered for 5 s (auth without a query).
- ``gc_freeze``: ``gc.freeze()`` every 2 s (long-lived objects leave the cyclic GC).
- ``timeline``: perf_counter stamps along each request to $BENCH_TIMELINE (bench/timeline_patch.py).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any


def sqlite_writer_lock() -> None:
    from viplanes.store import db as dbmod

    original = dbmod.Database.write
    lock = threading.RLock()

    @contextlib.contextmanager
    def write(self: Any) -> Iterator[Any]:
        if not self.is_sqlite:
            with original(self) as s:
                yield s
            return
        with lock, original(self) as s:
            yield s

    dbmod.Database.write = write  # type: ignore[method-assign]


def switch_interval() -> None:
    """Hand the GIL over every 0.5 ms instead of 5 ms: a thread woken by a barrier reply or a
    socket waits less for a busy one."""
    import sys

    sys.setswitchinterval(0.0005)


class _LazyCounts(dict):  # type: ignore[type-arg]
    """Live-lane counts fetched per grant only when asked (see ``lazy_quota``)."""

    def __init__(self, fetch: Any) -> None:
        super().__init__()
        self._fetch = fetch

    def get(self, gid: Any, default: Any = None) -> Any:  # type: ignore[override]
        if gid not in self:
            self.update(self._fetch([gid]))
            self.setdefault(gid, 0)
        return super().get(gid, default)

    def prefetch(self, gids: list[int]) -> None:
        missing = [g for g in gids if g not in self]
        if missing:
            self.update({g: 0 for g in missing})
            self.update(self._fetch(missing))


def lazy_quota() -> None:
    """Count live lanes only for grants that allow the request on every other point."""
    from viplanes.lanes import manager as lanes_mod
    from viplanes.policy.rules import check_grant

    original_counts = lanes_mod.LaneManager._live_counts
    original_decide = lanes_mod.decide

    def live_counts(self: Any, s: Any, grant_ids: Any, start: float, end: float, exclude: int | None = None) -> Any:
        return _LazyCounts(lambda ids: original_counts(self, s, ids, start, end, exclude))

    def decide(req: Any, rules: Any, topology: Any, now: float, live: Any) -> Any:
        if isinstance(live, _LazyCounts):
            live.prefetch([r.grant_id for r in rules if check_grant(req, r, now, 0).allowed])
        return original_decide(req, rules, topology, now, live)

    lanes_mod.LaneManager._live_counts = live_counts  # type: ignore[method-assign]
    lanes_mod.decide = decide


def desired_columns() -> None:
    """``desired_lanes`` reading plain columns instead of ORM objects with a joined principal."""
    from sqlalchemy import select

    from viplanes.domain.values import LaneSpec
    from viplanes.lanes import manager as lanes_mod
    from viplanes.store.models import Lane

    cols = (
        Lane.id,
        Lane.src_ip,
        Lane.dst_ip,
        Lane.protocol,
        Lane.dst_port,
        Lane.src_port,
        Lane.nat_ip,
        Lane.expires_at,
        Lane.rate_mbps,
    )

    def desired_lanes(self: Any) -> list[LaneSpec]:
        now = self.clock()
        with self.db.read() as s:
            rows = s.execute(select(*cols).where(Lane.state.in_(("installing", "active")), Lane.expires_at > now)).all()
        return [
            LaneSpec(
                lane_id=r[0],
                src_ip=r[1],
                dst_ip=r[2],
                protocol=r[3],
                dst_port=r[4],
                src_port=r[5],
                nat_ip=r[6],
                expires_at=r[7],
                rate_mbps=r[8],
            )
            for r in rows
        ]

    lanes_mod.LaneManager.desired_lanes = desired_lanes  # type: ignore[method-assign]


def one_write_per_switch() -> None:
    """Serialise a batch and hand os-ken one buffer per switch: each ``send_msg`` is a put on the
    datapath's send queue, and every put wakes the send thread (a GIL hand-off)."""
    from viplanes.controller.openflow.app import VipLanesApp

    def send_ofmsgs(self: Any, dpid: int, ofmsgs: list[Any]) -> bool:
        dp = self.datapaths.get(dpid)
        if dp is None:
            return False
        chunks = []
        for msg in ofmsgs:
            msg.datapath = dp
            if msg.xid is None:
                dp.set_xid(msg)
            msg.serialize()
            chunks.append(bytes(msg.buf))
        return bool(dp.send(b"".join(chunks)))

    VipLanesApp.send_ofmsgs = send_ofmsgs  # type: ignore[method-assign]


def token_cache() -> None:
    """Remember token -> principal for 5 s: one read transaction less per HTTP request (a
    disabled principal or a rotated token then works for up to 5 s more)."""
    import time

    from viplanes.api import auth

    original = auth.caller_for_token
    cache: dict[str, tuple[float, Any]] = {}

    def cached(s: Any, token: str) -> Any:
        hit = cache.get(token)
        now = time.monotonic()
        if hit is not None and now - hit[0] < 5.0:
            return hit[1]
        caller = original(s, token)
        if caller is not None:
            cache[token] = (now, caller)
        return caller

    auth.caller_for_token = cached


def gc_freeze() -> None:
    """Every 2 s move every object that survived so far out of the cyclic GC's reach
    (``gc.freeze``): thousands of cached lanes and messages make each full collection slow."""
    import gc
    import time

    def loop() -> None:
        while True:
            time.sleep(2.0)
            gc.freeze()

    threading.Thread(target=loop, name="bench-gc-freeze", daemon=True).start()


def handshakes_64() -> None:
    """64 TLS handshakes per source address at once instead of 8: a lab's switches all connect
    from 127.0.0.1, where a campus's come from one address each."""
    import dataclasses

    from viplanes.controller.openflow import admission

    fields = {f.name: f for f in dataclasses.fields(admission.Limits)}
    fields["pending_per_source"].default = 64
    admission.Limits.__init__.__defaults__ = tuple(f.default for f in dataclasses.fields(admission.Limits))


def reconciles_at_once() -> None:
    """$BENCH_RECONCILES_AT_ONCE switch reconciles at once instead of resync.RECONCILES_AT_ONCE."""
    from viplanes.controller.runtime import lane_runtime as runtime

    runtime.RECONCILES_AT_ONCE = int(os.environ.get("BENCH_RECONCILES_AT_ONCE", "3"))


def gc_log() -> None:
    """Log the cyclic GC's collections and time every 0.5 s (to see it in a restart)."""
    import gc
    import logging
    import threading
    import time

    state = {"t": 0.0, "n": [0, 0, 0], "start": 0.0}

    def cb(phase: str, info: dict) -> None:
        if phase == "start":
            state["start"] = time.perf_counter()
        else:
            state["t"] += time.perf_counter() - state["start"]
            state["n"][info["generation"]] += 1

    gc.callbacks.append(cb)
    log = logging.getLogger("viplanes.bench.gc")

    def loop() -> None:
        while True:
            time.sleep(0.5)
            log.warning(
                "gc so far: %.0f ms, collections by generation %s, enabled %s",
                state["t"] * 1000,
                state["n"],
                gc.isenabled(),
            )

    threading.Thread(target=loop, daemon=True, name="gc-log").start()


def gc_census() -> None:
    """Log, every 10 s, what the cyclic GC would walk in a full collection: the tracked
    objects outside the frozen set, by type (a diagnostic: the census itself takes a while)."""
    import collections
    import gc
    import logging
    import threading
    import time

    log = logging.getLogger("viplanes.bench.gc")

    def loop() -> None:
        while True:
            time.sleep(10)
            objs = gc.get_objects()
            kinds = collections.Counter(type(o).__name__ for o in objs)
            log.warning(
                "gc census: %d tracked outside the frozen %d; by generation %s; top %s",
                len(objs),
                gc.get_freeze_count(),
                [len(gc.get_objects(g)) for g in range(3)],
                kinds.most_common(12),
            )
            del objs

    threading.Thread(target=loop, daemon=True, name="gc-census").start()


def timeline() -> None:
    from bench.timeline_patch import install

    install()


PATCHES = {
    "timeline": timeline,
    "token_cache": token_cache,
    "gc_freeze": gc_freeze,
    "sqlite_writer_lock": sqlite_writer_lock,
    "switch_interval": switch_interval,
    "lazy_quota": lazy_quota,
    "desired_columns": desired_columns,
    "one_write_per_switch": one_write_per_switch,
    "handshakes_64": handshakes_64,
    "reconciles_at_once": reconciles_at_once,
    "gc_log": gc_log,
    "gc_census": gc_census,
}


def apply(names: str) -> list[str]:
    """Apply comma-separated patches; returns their names."""
    applied = []
    for name in filter(None, names.split(",")):
        PATCHES[name]()
        applied.append(name)
    return applied


def main() -> None:
    apply(os.environ.get("BENCH_PATCH", ""))
    from viplanes.cli.main import main as cli

    cli()


if __name__ == "__main__":
    main()
