"""An API world (root, alice, bob; alice's grant covers 10.1.0.0/24 -> 203.0.113.0/24, 443 and
9000-9100) with an acceptor on its lane manager, and sightings to offer it."""

from __future__ import annotations

from collections.abc import Iterator
from ipaddress import ip_address
from typing import Any

import pytest

from tests.support.world import World
from viplanes.auto.acceptor import Acceptor
from viplanes.domain.sighting import Sighting, SightingKind, SightingState


class Mono:
    """The acceptor's monotonic clock (rate bounds, refresh), stepped by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sighting(
    kind: SightingKind = SightingKind.FIREFLY,
    state: SightingState = SightingState.START,
    src: str = "10.1.0.10",
    dst: str = "203.0.113.10",
    dst_port: int = 9000,
    src_port: int = 40000,
    reporter: str | None = "same",
    **over: Any,
) -> Sighting:
    rep = ip_address(src) if reporter == "same" else (ip_address(reporter) if reporter else None)
    return Sighting(
        kind=kind,
        state=state,
        src_ip=ip_address(src),
        dst_ip=ip_address(dst),
        protocol=6,
        src_port=src_port,
        dst_port=dst_port,
        observed_at=over.pop("observed_at", 0.0),
        reporter=rep,
        **over,
    )


def set_policy(world: World, grant: str = "alice", **policy: Any) -> Any:
    body = {"enabled": True, "fireflies": True, "min_rate_mbps": 100, "idle_s": 10, **policy}
    return world.client.put(f"/api/v1/grants/{world.grants[grant]}/auto", json=body, headers=world.h("root"))


@pytest.fixture
def mono() -> Mono:
    return Mono()


@pytest.fixture
def acceptor(world: World, mono: Mono) -> Iterator[Acceptor]:
    # nat_sources empty: these tests use the desktop; the in-flight NAT rule has its own tests
    acc = Acceptor(world.app.extensions["viplanes"].manager, queue_size=8, clock=mono, nat_sources=frozenset())
    yield acc
