"""Issue 32's Done-when in the Mininet lab: detection from the switches makes the lane by itself.

A real `viplanes serve` with sFlow detection, the lab's access switches sampling 1 in 8, a grant
for the desktop and the DTN that allows automatic lanes at 8 Mbit/s (tests/support/sflowlanes.py).
An upload from the DTN (a public address) started with no lane request gets a lane within 3 s of
its start and its packets ride it, and the lane ends within its idle time after the upload stops;
a 4 Mbit/s upload inside the grant and a full-rate upload from the server (outside the grant)
never get one. The desktop's running upload (through the campus NAT) is taken over without
being cut: tests/integration/test_nat_takeover_lab.py. Numbers: docs/automatic-lanes.md.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.sflowlanes import SflowLab, mbps, sflow_lab, stop_all, timestamp
from viplanes.detection.sflow.goflow import GOFLOW2_CACHED

pytestmark = [
    pytest.mark.integration,
    pytest.mark.solo,  # a lane within 3 s of sFlow's samples: alone, not beside another lab
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]
RATE_MBPS, IDLE_S = 8, 3


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory):
    with sflow_lab(tmp_path_factory.mktemp("sflowlanes"), rate_mbps=RATE_MBPS, idle_s=IDLE_S) as lab:
        yield lab


def test_a_slow_upload_and_one_outside_the_grant_get_no_lane(lab: SflowLab) -> None:
    servers = lab.servers(5202, 5203)
    try:
        # inside the grant, below its rate; sampled enough (~21 samples a window) to be estimated
        mouse = lab.upload("dtn", 5202, 4, rate="4M")
        outside = lab.upload("server", 5203, 4)  # full firewall rate, from an address outside
        reports = [json.loads(p.communicate(timeout=20)[0]) for p in (mouse, outside)]
        time.sleep(1.0)  # the last sFlow datagram and the acceptor's worker
    finally:
        stop_all(servers)
    rates = [mbps(r) for r in reports]
    print(f"\nmouse {rates[0]:.1f} Mbit/s, outside the grant {rates[1]:.1f} Mbit/s: lanes {lab.lanes()}")
    assert rates[0] < RATE_MBPS * 0.6 and rates[1] > RATE_MBPS, rates  # the flows were what they claim
    assert lab.lanes() == []


def test_an_unrequested_upload_rides_a_lane_within_3_s_and_it_ends_when_idle(lab: SflowLab) -> None:
    servers = lab.servers(5201)
    try:
        started = time.time()
        upload = lab.upload("dtn", 5201, 4, cport=41000)
        lane = lab.lane_of(5201, timeout=6)
        assert lane is not None, "no automatic lane within 6 s"
        took = timestamp(lane["activated_at"]) - started
        report = json.loads(upload.communicate(timeout=20)[0])
        stopped = time.monotonic()
    finally:
        stop_all(servers)
    stats = lab.stats(lane["id"])
    print(f"\nupload start -> lane active {took * 1000:.0f} ms; trigger {lane['trigger']}")
    print(f"the upload: {mbps(report):.1f} Mbit/s, {report.get('error', 'no error')}; lane counters {stats}")
    assert lane["trigger"]["kind"] == "sflow" and lane["src_port"] == 41000, lane
    assert took < 3.0, took
    assert stats["bytes"] > 0, stats  # the upload's packets rode the lane
    # the idle clock starts at the counters' last growth, so that is what the idle end is measured from
    series: list[tuple[float, int | None]] = []  # (seconds after the stop, the lane's bytes)
    ended = None
    while ended is None and time.monotonic() - stopped < IDLE_S + 15:
        series.append((round(time.monotonic() - stopped, 1), lab.stats(lane["id"]).get("bytes")))
        ended = lab.lane_of(5201, state="released", timeout=0)
        time.sleep(0.3)
    idle = time.monotonic() - stopped
    grew = [t for (t, b), (_, prev) in zip(series[1:], series, strict=False) if b is not None and b != prev]
    last = grew[-1] if grew else 0.0
    print(f"lane counters after the stop (s, bytes): {series}")
    print(f"lane released {idle:.1f} s after the upload stopped, {idle - last:.1f} s after its counters last grew")
    assert ended is not None, "the idle lane did not end"
    # idle_s, then the ender's next check (0.5 s) and a stats round, from the last growth seen
    assert idle - last <= IDLE_S + 1.5, (idle, last)
