"""Store-level helpers: principals with grants, a lane request, the campus topology, for the tests
that drive the store and the lane manager directly (no HTTP)."""

from __future__ import annotations

from typing import Any

from tests.support.clock import T0
from tests.support.paths import CAMPUS_YAML
from tests.support.world import GRANT
from viplanes.authz.tokens import Caller
from viplanes.lanes.manager import LaneInput
from viplanes.store import records as store
from viplanes.store.db import Database
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology


def principals(
    db: Database, *specs: tuple[str, str], max_lanes: int = 3, ports: tuple[str, ...] = ("443", "9000-9100")
) -> dict[str, Caller | None]:
    """Principals with their callers; each researcher with a grant like ``GRANT`` (``max_lanes``, ``ports``)."""
    out = {}
    with db.write() as s:
        for name, role in specs:
            p, token = store.create_principal(s, name, role, T0)
            out[name] = store.caller_for_token(s, token)
            if role == "researcher":
                store.create_grant(
                    s,
                    store.GrantInput(principal=name, **{**GRANT, "max_lanes": max_lanes, "ports": list(ports)}),
                    "root",
                    T0,
                )
    return out


def lane_input(src: str = "10.1.0.10", port: int = 9000, **over: Any) -> LaneInput:
    """A tcp lane request from ``src`` to the cloud host (alice's grant allows it)."""
    return LaneInput(
        **{
            "src_ip": src,
            "dst_ip": "203.0.113.10",
            "protocol": "tcp",
            "dst_port": port,
            "duration_s": 600,
            "purpose": "test",
            **over,
        }
    )


def campus_topology() -> Topology:
    return load_topology(CAMPUS_YAML)
