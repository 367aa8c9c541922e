"""Idempotency-Key: a retry with the same key and body gets the lane already made.

The key is stored on the lane row, with a hash of the canonical request, in the transaction that
inserts the lane. So whatever happened after that commit (a 503 from a failed state update, a
dropped connection, a restart) the retry finds the lane, in whatever state it is, and never meets
``409 duplicate_lane``. The same key with another body is ``422 idempotency_key_reused``. Keys
are per principal: nobody can fetch another principal's lane by guessing its key.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from sqlalchemy import Connection, bindparam, select

from viplanes.errors import Invalid
from viplanes.store.lanesql import sqlite as rawsql
from viplanes.store.lanesql.core import LANES, lane_from_row
from viplanes.store.models import Lane

# fields added after keys were first stored: left out while unset, so an old request's hash holds
_ADDED_LATER = frozenset({"dst_prefix", "dst_host", "dst_ports"})


def request_digest(body: Any) -> str:
    """sha256 of a request dataclass as canonical JSON (sorted keys, defaults filled in)."""
    fields = {k: v for k, v in dataclasses.asdict(body).items() if v is not None or k not in _ADDED_LATER}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


_BY_KEY = select(LANES).where(
    LANES.c.principal_id == bindparam("principal_id"), LANES.c.idempotency_key == bindparam("key")
)


def find_replay(conn: Connection, principal_id: int, key: str, digest: str) -> Lane | None:
    """The principal's lane made with ``key`` (a transient ``Lane``); Invalid when it was made
    from another request. Lanes stored before migration 0003 have no hash and replay as before."""
    row = rawsql.first_mapping(conn, _BY_KEY, {"principal_id": principal_id, "key": key})
    first = lane_from_row(dict(row)) if row is not None else None
    if first is not None and first.request_hash is not None and first.request_hash != digest:
        raise Invalid(
            "this Idempotency-Key was already used with a different request",
            {"lane_id": first.id},
            code="idempotency_key_reused",
        )
    return first
