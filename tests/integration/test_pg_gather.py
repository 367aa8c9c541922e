"""A PostgreSQL lane request reads what its decision needs in the same message as its locks
(viplanes/store/lanesql/gather.py): the grants' row locks and the overlap lock ride in front of
the read. A request that waits for a lock must still see every lane its holder committed, as
when the locks and the read were separate round trips: in READ COMMITTED each statement of the
message takes its snapshot when it starts, after the locks before it were granted.

Each test holds a lock from another connection, commits a lane under it while the request
waits, and expects the request to count that lane (quota) or see it (duplicate)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, text

from tests.support.clock import FakeClock
from tests.support.world import World, make_world
from viplanes.dataplane.memory import MemoryDataplane
from viplanes.lanes.overlap import overlap_key, source_aliases
from viplanes.store.lanesql.core import LANES

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

WAIT_S = 0.5  # long enough for a request that does not wait to have answered


@pytest.fixture
def w(pg_cluster, topo) -> Iterator[World]:
    world = make_world(pg_cluster.new_database(), FakeClock(), MemoryDataplane(), topo)
    yield world
    world.app.extensions["viplanes"].db.dispose()


def _copy_lane(holder: Connection, lane_id: int, dst_port: int, grant_id: int | None = None) -> None:
    """A second live lane like ``lane_id`` but to ``dst_port`` (and under ``grant_id``, with that
    grant's holder as its owner), written in the holder's transaction."""
    fixed = ("id", "dst_port", "idempotency_key", "grant_id", "principal_id")
    copied = [c.name for c in LANES.columns if c.name not in fixed]
    names, values = ", ".join(copied), ", ".join(f"lanes.{c}" for c in copied)
    holder.execute(
        text(
            f"INSERT INTO lanes ({names}, dst_port, grant_id, principal_id) "
            f"SELECT {values}, :port, g.id, g.principal_id FROM lanes JOIN grants g ON g.id = coalesce(:g, lanes.grant_id) "
            "WHERE lanes.id = :id"
        ),
        {"port": dst_port, "id": lane_id, "g": grant_id},
    )


def _request_behind(w: World, holder: Connection, dst_port: int) -> Any:
    """alice asks for a lane while ``holder`` keeps its locks; the holder commits once the request
    is seen waiting. The request's answer."""
    answer: dict[str, Any] = {}
    asking = threading.Thread(target=lambda: answer.update(r=w.lane("alice", dst_port=dst_port)), daemon=True)
    asking.start()
    asking.join(WAIT_S)
    waited = asking.is_alive()
    holder.commit()
    asking.join(10.0)
    assert not asking.is_alive(), "the request did not answer within 10 s of the holder's commit"
    assert waited, f"the request answered without waiting for the lock: {answer['r'].json}"
    return answer["r"]


def test_a_request_behind_the_overlap_lock_sees_the_lane_its_holder_committed(w: World) -> None:
    first = w.lane("alice", dst_port=9001)
    assert first.status_code == 201, first.json
    topology = w.app.extensions["viplanes"].topology
    key = overlap_key(source_aliases(topology, "10.1.0.10"), "tcp")
    db = w.app.extensions["viplanes"].db
    with db.engine.connect() as holder:
        holder.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
        # bob's lane from alice's source: it locks bob's grant (its foreign key), not alice's, so
        # only the overlap lock can make alice's request wait for it
        _copy_lane(holder, first.json["id"], 9002, grant_id=w.grants["bob"])
        r = _request_behind(w, holder, 9002)
    assert r.status_code == 409 and r.json["error"] == "duplicate_lane", r.json


def test_a_request_behind_the_grant_lock_counts_the_lanes_its_holder_committed(w: World) -> None:
    first = w.lane("alice", dst_port=9001)  # the grant allows 3 live lanes
    assert first.status_code == 201, first.json
    db = w.app.extensions["viplanes"].db
    with db.engine.connect() as holder:
        holder.execute(text("SELECT id FROM grants WHERE id = :g FOR UPDATE"), {"g": w.grants["alice"]})
        _copy_lane(holder, first.json["id"], 9003)
        _copy_lane(holder, first.json["id"], 9004)
        r = _request_behind(w, holder, 9005)
    assert r.status_code == 409 and r.json["error"] == "quota_exceeded", r.json


def test_a_refused_request_leaves_no_lock_and_the_next_one_is_granted(w: World) -> None:
    assert w.lane("alice", dst_port=9001).status_code == 201
    dup = w.lane("alice", dst_port=9001)
    assert dup.status_code == 409 and dup.json["error"] == "duplicate_lane", dup.json
    nxt = w.lane("alice", dst_port=9002)  # the refused request's transaction ended: nothing held
    assert nxt.status_code == 201 and nxt.json["state"] == "active", nxt.json
    ids = [r["id"] for r in w.client.get("/api/v1/lanes", headers=w.h("alice")).json]
    assert len(ids) == len(set(ids)) == 2, ids
