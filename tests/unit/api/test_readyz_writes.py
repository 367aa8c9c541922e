"""Issue 28 item 9: /readyz is 503 with a JSON reason when the database refuses writes; /healthz
stays liveness (200).

Before, /readyz ran ``SELECT 1`` only: a read-only mount, a full disk or a PostgreSQL database in
read-only mode answered 200 "ready" while every lane request failed. The real cases run on a
tmpfs of our own (root) that fills up, and on a PostgreSQL database with
``default_transaction_read_only=on`` or a role without write privileges; the pure cases inject
``statvfs`` (a mount that turns read-only under open files cannot be made on demand: ``mount -o
remount,ro`` refuses while the database is open for writing)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.clock import FakeClock
from tests.support.world import World, make_world
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.store.writeprobe import MIN_FREE_BYTES, WriteProbe
from viplanes.topologies.model import Topology


def _statvfs(free: int, flags: int = 0) -> Any:
    return lambda _path: SimpleNamespace(f_flag=flags, f_bavail=free // 4096, f_frsize=4096)


def _use_probe(w: World, **kw: Any) -> WriteProbe:
    probe = WriteProbe(w.app.extensions["viplanes"].db, clock=w.clock, **kw)
    w.app.extensions["viplanes.writeprobe"] = probe
    return probe


def test_ready_while_writes_work(world: World) -> None:
    r = world.client.get("/api/v1/readiness", headers=world.h("root"))
    assert r.status_code == 200 and "database_writes" not in r.json, r.json


@pytest.mark.parametrize(
    "statvfs,why",
    [
        (_statvfs(10**9, os.ST_RDONLY), "the database's file system is mounted read-only"),
        (_statvfs(MIN_FREE_BYTES - 4096), "disk full: "),
    ],
    ids=["read-only", "full"],
)
def test_refused_writes_make_readyz_503_and_healthz_stays_200(world: World, statvfs: Any, why: str) -> None:
    _use_probe(world, statvfs=statvfs)
    r = world.client.get("/readyz")
    assert r.status_code == 503 and r.headers["Retry-After"]
    assert r.json["database"] == "failing" and "database_writes" not in r.json, r.json  # the why: operators'
    r = world.client.get("/api/v1/readiness", headers=world.h("root"))
    assert r.status_code == 503 and r.headers["Retry-After"]
    assert r.json["status"] == "not_ready" and r.json["database_writes"].startswith(why), r.json
    assert world.client.get("/healthz").status_code == 200  # liveness: restarting would not help


def test_a_readyz_flood_costs_one_probe_per_ttl(world: World) -> None:
    """The abuse: /readyz is open to anyone, and each probe takes SQLite's writer lock. 500 calls
    in one instant run one probe; the next runs only after the TTL."""
    probe = _use_probe(world)
    for _ in range(500):
        assert world.client.get("/readyz").status_code == 200
    assert probe.probes == 1
    world.clock.advance(probe.ttl_s)
    world.client.get("/readyz")
    assert probe.probes == 2


def test_recovers_when_space_returns(world: World) -> None:
    free = {"bytes": 0}
    probe = _use_probe(
        world, statvfs=lambda _p: SimpleNamespace(f_flag=0, f_bavail=free["bytes"] // 4096, f_frsize=4096)
    )
    assert world.client.get("/readyz").status_code == 503
    free["bytes"] = 10**9
    assert world.client.get("/readyz").status_code == 503  # cached until the TTL passes
    world.clock.advance(probe.ttl_s)
    assert world.client.get("/readyz").status_code == 200


# --- real file systems (root: a tmpfs of our own) -------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.integration
def test_full_disk_is_not_ready_until_space_returns(tmpfs: Path, clock: FakeClock, topo: Topology) -> None:
    w = make_world(f"sqlite:///{tmpfs / 'vl.db'}", clock, MemoryDataplane(), topo)
    _use_probe(w)
    filler = tmpfs / "filler"
    try:
        assert w.client.get("/readyz").status_code == 200
        subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M", "count=100"], capture_output=True)
        clock.advance(3)
        r = w.client.get("/api/v1/readiness", headers=w.h("root"))
        print("full disk:", r.status_code, r.json)
        assert r.status_code == 503 and r.json["database_writes"].startswith("disk full"), r.json
        filler.unlink()
        clock.advance(3)
        assert w.client.get("/readyz").status_code == 200
        assert w.lane().status_code == 201
    finally:
        filler.unlink(missing_ok=True)
        w.app.extensions["viplanes"].db.dispose()


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_read_only_database_is_not_ready(pg_cluster: Any, clock: FakeClock, topo: Topology) -> None:
    url = pg_cluster.new_database()
    name = url.rsplit("/", 1)[1]
    w = make_world(url, clock, MemoryDataplane(), topo)
    _use_probe(w)
    db = w.app.extensions["viplanes"].db
    try:
        assert w.client.get("/readyz").status_code == 200
        pg_cluster._admin(f"ALTER DATABASE {name} SET default_transaction_read_only = on")
        db.engine.dispose()  # new sessions, as after a fail-over onto a read-only server
        clock.advance(3)
        r = w.client.get("/api/v1/readiness", headers=w.h("root"))
        print("postgres read-only:", r.status_code, r.json)
        assert r.status_code == 503 and "read-only" in r.json["database_writes"], r.json
        assert w.lane().status_code >= 500  # the writes really fail
        assert w.client.get("/healthz").status_code == 200
        pg_cluster._admin(f"ALTER DATABASE {name} SET default_transaction_read_only = off")
        db.engine.dispose()
        clock.advance(3)
        assert w.client.get("/readyz").status_code == 200
    finally:
        db.dispose()


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_write_probe_sees_a_revoked_privilege(pg_cluster: Any, clock: FakeClock, topo: Topology) -> None:
    """Reads work, writes do not (a role left with SELECT only): only a write probe sees it."""
    url = pg_cluster.new_database()
    w = make_world(url, clock, MemoryDataplane(), topo)
    db = w.app.extensions["viplanes"].db
    name = url.rsplit("/", 1)[1]
    try:
        pg_cluster._admin(f"CREATE ROLE ro_{name} LOGIN")
        admin = db.engine.url
        with db.engine.begin() as conn:
            conn.exec_driver_sql(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO ro_{name}")
        from tests.support.apps import make_app

        ro_url = admin.set(username=f"ro_{name}").render_as_string(hide_password=False)
        app = make_app({"db_url": ro_url, "migrate": False}, dataplane=MemoryDataplane(), topology=topo, clock=clock)
        try:
            r = app.test_client().get("/readyz")
            assert r.status_code == 503 and r.json["database"] == "failing", r.json  # the why: operators'
            r = app.test_client().get("/api/v1/readiness", headers=w.h("root"))
            print("postgres select-only role:", r.status_code, r.json)
            assert r.status_code == 503, r.json
            why = r.json["database_writes"]
            assert why.startswith("database refuses writes") and "permission denied" in why, why
        finally:
            app.extensions["viplanes"].db.dispose()
    finally:
        db.dispose()
