"""`viplanes serve` as a real process, and 200 simultaneous HTTP lane requests through the API server.

The serve tests use ``--dataplane memory`` (no switches needed); the OpenFlow side of serve is
exercised by the controller's own integration tests.
"""

from __future__ import annotations

import subprocess
import threading

import pytest
import requests

from tests.support.concurrency import run_together
from tests.support.procs import wait_for
from tests.support.serve import VIPLANES, bootstrap, lane_body, memory_serve, setup_researcher

pytestmark = pytest.mark.integration


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def serve_db(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'serve.db'}"
    return request.getfixturevalue("pg_cluster").new_database()


def test_serve_lifecycle_and_restart_loses_nothing(serve_db, tmp_path):
    op = bootstrap(serve_db)
    first = memory_serve(serve_db, tmp_path).start()
    try:
        tok = setup_researcher(first.url, op, max_lanes=5)
        h = {"Authorization": f"Bearer {tok}"}
        ids = []
        for port in (9000, 9001, 9002):
            r = requests.post(f"{first.url}/api/v1/lanes", json=lane_body(port), headers=h, timeout=10)
            assert r.status_code == 201 and r.json()["state"] == "active"
            ids.append(r.json()["id"])
        short = requests.post(f"{first.url}/api/v1/lanes", json=lane_body(9003, duration=1), headers=h, timeout=10)

        def state() -> str:
            return str(
                requests.get(f"{first.url}/api/v1/lanes/{short.json()['id']}", headers=h, timeout=10).json()["state"]
            )

        # the scheduler (0.1 s tick) expires it in real time: polled, not slept on for 1.5 s (a
        # loaded machine's tick and write can come later); an hour-long lane would still fail it
        assert wait_for(lambda: state() == "expired", 10), state()
        assert "viplanes_lanes{state=\"active\"} 3.0" in requests.get(f"{first.url}/metrics", timeout=10).text
    finally:
        assert first.stop() == 0  # SIGTERM is a clean shutdown
    second = memory_serve(serve_db, tmp_path).start()
    try:
        lanes = requests.get(f"{second.url}/api/v1/lanes?state=active", headers=h, timeout=10).json()
        assert sorted(ln["id"] for ln in lanes) == sorted(ids)  # nothing accepted was lost
        r = requests.post(f"{second.url}/api/v1/lanes", json=lane_body(9000), headers=h, timeout=10)
        assert r.status_code == 409 and r.json()["error"] == "duplicate_lane"
    finally:
        second.stop()


def test_serve_refuses_bad_options(tmp_path):
    r = subprocess.run(
        [*VIPLANES, "serve", "--api", "nonsense", "--dataplane", "memory"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "HOST:PORT" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    r = subprocess.run(
        [*VIPLANES, "serve", "--topology", str(bad), "--dataplane", "memory"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert r.returncode == 1 and "topology" in r.stderr and "Traceback" not in r.stderr


def test_200_simultaneous_http_requests_quota_5(serve_db, tmp_path, record_property):
    """Through a real threaded API server (cheroot): exactly 5 lanes, every other answer a 409."""
    from tests.support.apps import make_app
    from tests.support.live import LiveServer
    from viplanes.dataplane.memory import MemoryDataplane

    app = make_app({"db_url": serve_db, "db_pool_size": 20}, dataplane=MemoryDataplane())
    server = LiveServer(app, threads=16)
    try:
        op = bootstrap(serve_db)
        tok = setup_researcher(server.url, op, max_lanes=5)
        n = 200
        barrier = threading.Barrier(n)
        results: list[tuple[int, str]] = []
        lock = threading.Lock()

        def one(i: int) -> None:
            with requests.Session() as s:
                barrier.wait()
                r = s.post(
                    f"{server.url}/api/v1/lanes",
                    json=lane_body(9000 + i),
                    headers={"Authorization": f"Bearer {tok}"},
                    timeout=60,
                )
                with lock:
                    results.append((r.status_code, r.json().get("state") or r.json().get("error")))

        elapsed = run_together(one, n)
        record_property("seconds", round(elapsed, 3))
        print(f"\n200 HTTP lane requests, quota 5, {app.extensions['viplanes'].db.engine.dialect.name}: {elapsed:.2f}s")
        assert len(results) == n
        assert sorted(set(results)) == [(201, "active"), (409, "quota_exceeded")]
        assert sum(1 for code, _ in results if code == 201) == 5
        with app.extensions["viplanes"].db.read() as s:
            from sqlalchemy import func, select

            from viplanes.store.models import Lane

            assert s.scalar(select(func.count()).select_from(Lane)) == 5
    finally:
        server.stop()
        app.extensions["viplanes"].db.dispose()
