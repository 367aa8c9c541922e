"""What the two NAT takeover lab modules share (test_nat_takeover_lab.py, test_nat_proof_lab.py):
their marks, the lab's numbers, the module's lab and the acceptor's counters from /metrics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.support.sflowlanes import SflowLab, sflow_lab
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED

MARKS = [
    pytest.mark.integration,
    pytest.mark.solo,  # detection and the NAT watch within seconds: alone, not beside another lab
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]
RATE_MBPS, IDLE_S, FIREWALL_MBPS = 8, 3, 15
NAT_BOX = "198.51.100.2"
TAKEOVER_S = 3.0  # issue 32: a NAT'd flow is laned within 3 s (p50 ~1.3 s: the hold, the 0.8 s watch)
# plus this when the first watch is read while the firewall's queue still holds marked packets
# (marked ~1,000 at s1, ~600 out at s3, no strays: nat_unconfirmed) and the flow's next sighting,
# 2 s later (the acceptor's repeat memory), proves it: 3.1-3.4 s measured, 4 in 14 flows at load 6
SLACK_S = 1.0


def nat_lab(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[SflowLab]:
    """The body of a module's ``lab`` fixture: one lab per module."""
    with sflow_lab(tmp_path_factory.mktemp(name), rate_mbps=RATE_MBPS, idle_s=IDLE_S) as lab:
        yield lab


def outcomes(lab: SflowLab) -> dict[str, float]:
    """The acceptor's outcome counters, from serve's /metrics."""
    text = requests.get(f"{lab.serve.url}/metrics", timeout=10).text
    prefix = 'viplanes_auto_sightings_total{outcome="'
    return {line.split('"')[1]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix)}
