"""Topology variants for tests: the same campus with a switch feature turned off."""

from __future__ import annotations

import dataclasses

from tests.support.paths import TOPOLOGIES
from viplanes.topologies.loader import load_topology
from viplanes.topologies.model import Topology


def without_fast_failover(topo: Topology) -> Topology:
    """``topo`` with no switch declaring fast-failover groups: lanes get no backup path, so a
    failed link is the controller's re-route alone (what the re-route tests measure)."""
    switches = tuple(
        dataclasses.replace(
            s, caps=dataclasses.replace(s.caps, features=dataclasses.replace(s.caps.features, fast_failover=False))
        )
        for s in topo.switches
    )
    return dataclasses.replace(topo, switches=switches)


def redundant_campus(fast_failover: bool = False) -> Topology:
    """The shipped redundant campus (two bypass paths), the controller's re-route alone unless
    ``fast_failover``."""
    topo = load_topology(TOPOLOGIES / "campus-redundant.yaml")
    return topo if fast_failover else without_fast_failover(topo)
