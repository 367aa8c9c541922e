"""Issue 9's API findings and issue 10's Idempotency-Key retries, in process (SQLite; PostgreSQL
too where the test takes ``db``). The same cases run against real serve processes in
tests/integration/test_attack_api.py."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import OperationalError

from tests.support.clock import T0
from tests.support.store import lane_input, principals
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.errors import Conflict, Invalid
from viplanes.lanes.manager import LaneManager
from viplanes.store import records as store
from viplanes.store.backup import max_revision
from viplanes.store.db import Database
from viplanes.store.models import Lane, Principal

# --- the last operator -------------------------------------------------------------------------


def test_the_last_operator_cannot_be_disabled(db):
    principals(db, ("root", "operator"), ("alice", "researcher"))
    with pytest.raises(Conflict) as exc, db.write() as s:
        store.set_disabled(s, "root")
    assert exc.value.code == "last_operator" and "last enabled operator" in exc.value.message
    with db.write() as s:
        store.create_principal(s, "deputy", "operator", T0)
    with db.write() as s:
        store.set_disabled(s, "root")
    with pytest.raises(Conflict), db.write() as s:
        store.set_disabled(s, "deputy")
    with db.write() as s:  # disabling a researcher or an already disabled operator is unaffected
        store.set_disabled(s, "alice")
        store.set_disabled(s, "root")


def test_two_operators_disabling_each_other_at_once_leave_one(db):
    with db.write() as s:
        store.create_principal(s, "op0", "operator", T0)
    survivor = "op0"
    for round_ in range(1, 6):
        rival = f"op{round_}"
        with db.write() as s:
            store.create_principal(s, rival, "operator", T0)
        barrier = threading.Barrier(2)
        outcomes: list[str] = []

        def disable(target: str, barrier: threading.Barrier = barrier, outcomes: list[str] = outcomes) -> None:
            barrier.wait()
            try:
                with db.write() as s:
                    store.set_disabled(s, target)
                outcomes.append("done")
            except Conflict as exc:
                outcomes.append(exc.code)

        threads = [threading.Thread(target=disable, args=(t,)) for t in (survivor, rival)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(outcomes) == ["done", "last_operator"], outcomes
        with db.read() as s:
            enabled = s.scalars(
                select(Principal.name).where(Principal.role == "operator", Principal.disabled.is_(False))
            ).all()
        assert len(enabled) == 1
        survivor = enabled[0]


def test_api_answers_409_for_the_last_operator(world):
    r = world.client.post("/api/v1/principals/root/disable", headers=world.h("root"))
    assert r.status_code == 409 and r.json["error"] == "last_operator"
    assert world.client.get("/api/v1/whoami", headers=world.h("root")).status_code == 200


# --- principal names ---------------------------------------------------------------------------


def test_principal_names_are_unique_ignoring_case(db):
    principals(db, ("alice", "researcher"))
    for other in ("ALICE", "Alice", "aLiCe"):
        with pytest.raises(Conflict) as exc, db.write() as s:
            store.create_principal(s, other, "operator", T0)
        assert exc.value.code == "principal_exists"
    with db.read() as s:
        assert store.get_principal(s, "ALICE").name == "alice"


def test_concurrent_creates_of_one_name_in_different_cases_make_one(db):
    barrier = threading.Barrier(8)
    outcomes: list[str] = []

    def create(i: int) -> None:
        name = "".join(c.upper() if (i >> k) & 1 else c for k, c in enumerate("carol"))
        barrier.wait()
        try:
            with db.write() as s:
                store.create_principal(s, name, "researcher", T0)
            outcomes.append("created")
        except Conflict:
            outcomes.append("exists")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(outcomes) == ["created"] + ["exists"] * 7


def test_migration_refuses_names_that_differ_only_in_case(tmp_path):
    from viplanes.store.migrations import current, upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    d = Database(url)
    upgrade(d.engine, "0002")
    with d.engine.begin() as conn:
        for name in ("alice", "bob", "ALICE"):
            conn.execute(
                text("INSERT INTO principals (name, role, disabled, created_at) VALUES (:n, 'researcher', 0, 0)"),
                {"n": name},
            )
    r = subprocess.run(
        [sys.executable, "-m", "viplanes.cli.main", "db", "upgrade", "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "alice, ALICE" in r.stderr and "differ only in case" in r.stderr
    assert current(d.engine) == "0002"  # nothing changed
    with d.engine.begin() as conn:
        conn.execute(text("UPDATE principals SET name = 'alice2' WHERE name = 'ALICE'"))
    upgrade(d.engine)
    assert current(d.engine) == max_revision()
    d.dispose()


# --- Idempotency-Key ---------------------------------------------------------------------------


def _manager(db) -> LaneManager:
    from tests.support.paths import CAMPUS_YAML as CAMPUS
    from viplanes.topologies.loader import load_topology

    return LaneManager(db, MemoryDataplane(), load_topology(CAMPUS), clock=lambda: T0)


def test_idempotency_key_with_another_body_is_refused(db):
    callers = principals(db, ("alice", "researcher"), ("bob", "researcher"), max_lanes=5)
    mgr = _manager(db)
    first, created = mgr.request(callers["alice"], lane_input(port=9001), "k-1")
    assert created
    again, created = mgr.request(callers["alice"], lane_input(port=9001), "k-1")
    assert again.id == first.id and not created
    for changed in (
        lane_input(port=9002),
        lane_input(port=9001, purpose="other"),
        lane_input(port=9001, duration_s=601),
    ):
        with pytest.raises(Invalid) as exc:
            mgr.request(callers["alice"], changed, "k-1")
        assert exc.value.code == "idempotency_key_reused" and exc.value.status == 422
    bobs, created = mgr.request(callers["bob"], lane_input(src="10.1.0.20", port=9001), "k-1")
    assert created and bobs.id != first.id  # keys are per principal


def test_retry_after_a_503_gets_the_lane_never_duplicate_lane(world, monkeypatch):
    """Issue 10: the lane row commits, the state update fails (database away); its retry with the
    same key gets that lane, in whatever state it is. Issue 41: the first answer is that lane too
    (201, installing), never a 503 "try again" for a lane that exists."""
    manager = world.app.extensions["viplanes"].manager
    real = manager.activation.activate

    def db_gone(lane):  # type: ignore[no-untyped-def]
        raise OperationalError("UPDATE lanes", {}, Exception("server closed the connection"))

    monkeypatch.setattr(manager.activation, "activate", db_gone)
    key = {"Idempotency-Key": "transfer-42"}
    r = world.client.post("/api/v1/lanes", json=_body(), headers={**world.h("alice"), **key})
    assert r.status_code == 201 and r.json["state"] == "installing", r.json
    monkeypatch.setattr(manager.activation, "activate", real)
    retry = world.client.post("/api/v1/lanes", json=_body(), headers={**world.h("alice"), **key})
    assert retry.status_code == 200 and retry.json["state"] == "installing", retry.json
    plain = world.client.post("/api/v1/lanes", json=_body(), headers=world.h("alice"))
    assert plain.status_code == 409 and plain.json["error"] == "duplicate_lane"  # without the key: as before
    with world.app.extensions["viplanes"].db.read() as s:
        assert len(s.scalars(select(Lane)).all()) == 1


def _body(**over):  # type: ignore[no-untyped-def]
    return {
        "src_ip": "10.1.0.10",
        "dst_ip": "203.0.113.10",
        "protocol": "tcp",
        "dst_port": 9000,
        "duration_s": 600,
        "purpose": "nightly sync",
        **over,
    }


def test_api_answers_422_for_a_reused_key(world):
    key = {**world.h("alice"), "Idempotency-Key": "abc"}
    assert world.client.post("/api/v1/lanes", json=_body(), headers=key).status_code == 201
    r = world.client.post("/api/v1/lanes", json=_body(dst_port=9001), headers=key)
    assert r.status_code == 422 and r.json["error"] == "idempotency_key_reused"


# --- destinations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dst,code",
    [
        ("255.255.255.255", "dst_broadcast"),
        ("203.0.113.0", "dst_broadcast"),
        ("239.1.1.1", "dst_multicast"),
        ("127.0.0.53", "dst_reserved"),
        ("10.1.0.20", "dst_campus"),
        ("198.51.100.193", "dst_lane_pool"),
    ],
)
def test_lane_destinations_refused_by_policy(world, dst, code):
    world.client.post(
        "/api/v1/grants",
        headers=world.h("root"),
        json={
            "principal": "alice",
            "src_prefixes": ["10.1.0.0/24"],
            "dst_prefixes": ["0.0.0.0/0"],
            "protocols": ["tcp"],
            "ports": [9000],
            "max_duration_s": 3600,
        },
    )
    r = world.client.post("/api/v1/lanes", json=_body(dst_ip=dst), headers=world.h("alice"))
    assert r.status_code == 403 and r.json["error"] == code


def test_grant_into_the_lane_pool_is_refused_but_the_internet_is_not(world):
    def grant(prefix: str):  # type: ignore[no-untyped-def]
        return world.client.post(
            "/api/v1/grants",
            headers=world.h("root"),
            json={
                "principal": "alice",
                "src_prefixes": ["10.1.0.0/24"],
                "dst_prefixes": ["203.0.113.0/24", prefix],
                "protocols": ["tcp"],
                "ports": [443],
                "max_duration_s": 60,
            },
        )

    r = grant("198.51.100.192/28")
    assert r.status_code == 422 and r.json["error"] == "invalid_grant"
    assert "lane pool" in r.json["message"] and r.json["details"]["dst_prefixes"]
    assert grant("0.0.0.0/0").status_code == 201


# --- text fields -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["alice\n", "bob\r\n", "ca rol", "dävid", "e\u200bve"])
def test_principal_names_are_plain_ascii_with_no_trailing_newline(world, name):
    r = world.client.post("/api/v1/principals", json={"name": name, "role": "researcher"}, headers=world.h("root"))
    assert r.status_code == 422 and "name" in r.json["details"]["json"]


@pytest.mark.parametrize("purpose", ["sync\n", "a\u202eexe.txt", "zero\u200bwidth", "line\u2028sep", "\ue000"])
def test_purpose_refuses_control_format_and_bidi_characters(world, purpose):
    r = world.client.post("/api/v1/lanes", json=_body(purpose=purpose), headers=world.h("alice"))
    assert r.status_code == 422 and "purpose" in r.json["details"]["json"]


def test_purpose_keeps_ordinary_unicode(world):
    r = world.client.post("/api/v1/lanes", json=_body(purpose="Übertragung für Projekt Ω 😀"), headers=world.h("alice"))
    assert r.status_code == 201 and r.json["purpose"] == "Übertragung für Projekt Ω 😀"


def test_lane_list_principal_filter_ignores_case(world):
    assert world.lane().status_code == 201
    lanes = world.client.get("/api/v1/lanes?principal=ALICE", headers=world.h("root")).json
    assert [x["principal"] for x in lanes] == ["alice"]
