"""Resolvers, migration 0004 on a database with lanes in it, and Idempotency-Key hashes that
survive the new request fields."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from viplanes.lanes.idempotency import request_digest
from viplanes.lanes.manager import LaneInput
from viplanes.lanes.resolver import (
    ResolveError,
    StaticResolver,
    SystemResolver,
    canonical,
    default_resolver,
    is_host_name,
)
from viplanes.store.backup import max_revision
from viplanes.store.db import Database


def test_host_names() -> None:
    assert is_host_name("s3.us-east-1.amazonaws.com") and is_host_name("cloud.example.")
    for bad in ("10.0.0.1", "2001:db8::1", "-x.example", "a..b", "x" * 64 + ".example", "a_b.example", ""):
        assert not is_host_name(bad), bad


def test_canonical_sorts_v4_first_and_dedups() -> None:
    assert canonical(["2001:db8::1", "203.0.113.2", "203.0.113.10", "203.0.113.2"]) == (
        "203.0.113.2",
        "203.0.113.10",
        "2001:db8::1",
    )


def test_static_and_system_resolvers(monkeypatch: pytest.MonkeyPatch) -> None:
    r = StaticResolver({"a.example": (["203.0.113.1"], 5)})
    assert r.resolve("A.Example.").addresses == ("203.0.113.1",) and r.resolve("a.example").ttl_s == 5
    with pytest.raises(ResolveError):
        r.resolve("b.example")

    def fake_getaddrinfo(name: str, *_a: Any, **_k: Any) -> list[Any]:
        if name == "gone.example":
            raise socket.gaierror(-2, "Name or service not known")
        return [
            (socket.AF_INET, 1, 6, "", ("203.0.113.7", 0)),
            (socket.AF_INET6, 1, 6, "", ("2001:db8::7", 0, 0, 0)),
            (socket.AF_INET, 1, 6, "", ("203.0.113.7", 0)),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    got = SystemResolver(ttl_s=42).resolve("s3.example")
    assert got.addresses == ("203.0.113.7", "2001:db8::7") and got.ttl_s == 42
    with pytest.raises(ResolveError):
        SystemResolver().resolve("gone.example")
    assert default_resolver() is not None


def test_idempotency_hash_unchanged_for_old_requests() -> None:
    body = LaneInput(
        src_ip="10.1.0.10", dst_ip="203.0.113.10", protocol="tcp", dst_port=9000, duration_s=600, purpose="x"
    )
    # the hash a pre-issue-11 server stored for this body: its fields only, without the new ones
    import dataclasses
    import hashlib
    import json

    old = {k: v for k, v in dataclasses.asdict(body).items() if k not in ("dst_prefix", "dst_host", "dst_ports")}
    assert (
        request_digest(body)
        == hashlib.sha256(json.dumps(old, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    )
    ranged = dataclasses.replace(body, dst_port=None, dst_ports="9000-9010")
    assert request_digest(ranged) != request_digest(body)


def test_migration_0004_keeps_old_lanes(tmp_path: Path) -> None:
    from alembic import command

    from viplanes.lanes.specs import SPEC_COLUMNS, spec_from_row
    from viplanes.store.migrations import alembic_config, current, upgrade

    d = Database(f"sqlite:///{tmp_path / 'old.db'}")
    upgrade(d.engine, "0003")
    with d.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO principals (id, name, role, disabled, created_at) VALUES (1, 'a', 'researcher', 0, 0)")
        )
        conn.execute(
            text(
                "INSERT INTO grants (id, principal_id, src_prefixes, dst_prefixes, protocols, ports, "
                "max_duration_s, max_lanes, created_at, created_by) VALUES (1, 1, '[]', '[]', '[]', '[]', "
                "60, 1, 0, 'root')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO lanes (id, principal_id, grant_id, src_ip, dst_ip, protocol, dst_port, "
                "duration_s, purpose, state, reason, created_at, starts_at, expires_at) VALUES "
                "(1, 1, 1, '10.1.0.10', '203.0.113.10', 'tcp', 9000, 60, 'p', 'active', '', 0, 0, 9e9)"
            )
        )
    upgrade(d.engine)
    assert current(d.engine) == max_revision()
    from sqlalchemy import select

    with d.engine.connect() as conn:
        spec = spec_from_row(conn.execute(select(*SPEC_COLUMNS)).one())
    assert spec.dst_ip == "203.0.113.10" and spec.dst_nets == ("203.0.113.10/32",) and spec.dst_ports == ((9000, 9000),)
    with d.engine.begin() as conn:  # a set lane, then back down: it is ended, the single one kept
        conn.execute(
            text(
                "INSERT INTO lanes (id, principal_id, grant_id, src_ip, dst_ip, protocol, dst_port, "
                "dst_nets, dst_ports, duration_s, purpose, state, reason, created_at, starts_at, expires_at)"
                " VALUES (2, 1, 1, '10.1.0.10', NULL, 'tcp', NULL, '[\"203.0.113.0/28\"]', '[[1, 2]]', "
                "60, 'p', 'active', '', 0, 0, 9e9)"
            )
        )
    command.downgrade(alembic_config(d.engine), "0003")
    with d.engine.connect() as conn:
        states = dict(conn.execute(text("SELECT id, state FROM lanes")).all())
    assert states == {1: "active", 2: "revoked"}
    d.dispose()
