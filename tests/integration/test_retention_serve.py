"""Issue 28 item 9: a real ``viplanes serve`` prunes on its own (export first, audited), and
refuses to start with a retention it would regret."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.support.procs import free_port, wait_for
from tests.support.serve import VIPLANES, memory_serve
from viplanes.store import records as store
from viplanes.store.db import Database
from viplanes.store.models import AuditEvent, Lane
from viplanes.store.retention import DAY_S

pytestmark = pytest.mark.integration


def _seed(url: str) -> list[int]:
    """Three lanes ended 100 days ago and a live one; the ids of the ended ones."""
    db = Database(url)
    db.create_all()
    now = time.time()
    with db.write() as s:
        p, _ = store.create_principal(s, "alice", "researcher", now - 200 * DAY_S)
        body = {"src_prefixes": ["10.1.0.0/24"], "dst_prefixes": ["203.0.113.0/24"], "protocols": ["tcp"]}
        g = store.create_grant(
            s, store.GrantInput(principal="alice", ports=[9000], max_duration_s=600, **body), "root", now
        )
        ids = []
        for i, state in enumerate(("expired", "released", "revoked", "active")):
            ended = now - 100 * DAY_S if state != "active" else None
            lane = Lane(
                principal_id=p.id,
                grant_id=g.id,
                src_ip="10.1.0.10",
                dst_ip="203.0.113.10",
                protocol="tcp",
                dst_port=9000 + i,
                duration_s=600,
                purpose="p",
                state=state,
                reason="",
                created_at=now - 100 * DAY_S,
                starts_at=now - 100 * DAY_S,
                expires_at=now + 600 if ended is None else ended,
                ended_at=ended,
            )
            s.add(lane)
            s.flush()
            ids.append(lane.id)
    db.dispose()
    return ids


def _pruned(url: str) -> bool:
    """The prune's audit event is committed."""
    db = Database(url)
    try:
        with db.read() as s:
            return bool(s.scalars(select(AuditEvent).where(AuditEvent.action == "db.prune")).all())
    finally:
        db.dispose()


def test_serve_prunes_on_its_own(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'vl.db'}"
    ids = _seed(url)
    archive = tmp_path / "archive"
    env = {**os.environ, "VIPLANES_PRUNE_EVERY_S": "1", "VIPLANES_RETENTION_EXPORT_DIR": str(archive)}
    serve = memory_serve(url, tmp_path, env=env).start()
    try:
        # the export, then the batch's commit and its audit event: polled (a fixed 0.5 s after the
        # export could end before a loaded machine's commit)
        wait_for(lambda: list(archive.glob("lanes-*.jsonl")) and _pruned(url), 30, step=0.5)
    finally:
        serve.stop()
    files = list(archive.glob("lanes-*.jsonl"))
    assert len(files) == 1, serve.log.read_text()[-2000:]
    exported = sorted(json.loads(x)["id"] for x in files[0].read_text().splitlines())
    assert exported == ids[:3]
    db = Database(url)
    try:
        with db.read() as s:
            assert s.scalars(select(Lane.id)).all() == [ids[3]]  # the live lane stays
            done = s.scalars(select(AuditEvent).where(AuditEvent.action == "db.prune")).all()
            assert len(done) == 1 and done[0].actor == "system"
    finally:
        db.dispose()


def test_serve_refuses_a_retention_under_a_day(tmp_path: Path) -> None:
    env = {**os.environ, "VIPLANES_LANE_RETENTION_DAYS": "0.01"}
    args = [
        *VIPLANES,
        "serve",
        "--dataplane",
        "memory",
        "--db",
        f"sqlite:///{tmp_path / 'x.db'}",
        "--api",
        f"127.0.0.1:{free_port()}",
    ]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "retention: lane retention must be 0 (keep forever) or at least 1 day" in out.stderr
