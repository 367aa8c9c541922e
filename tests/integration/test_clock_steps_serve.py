"""`viplanes serve` on real OVS while its wall clock steps an hour (issue 28, item 4).

The serve process runs under libfaketime (tests/support/faketime.py): a test writes ``+3600`` or
``-3600`` to its offset file and the process's ``time.time()`` jumps, its monotonic clock does
not, exactly as across ``date -s`` on a real machine. Four userspace bridges with the campus
dpids connect over TLS.

Before the steady clock: +1 h expired a 2-minute lane at the next tick and deleted its flows;
-1 h kept a 20-second lane ``active`` past its end, and the drift check put back the flows the
switches had timed out, with an hour of fresh hard timeout.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.support import faketime
from tests.support.ovs import add_bridge, lane_flows
from tests.support.procs import free_port, lab_security_args
from tests.support.runtag import ifname
from tests.support.serve import bootstrap, lane_body, setup_researcher
from viplanes.lab.servechild import ServeChild

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not faketime.available(), reason="libfaketime missing (Debian faketime; scripts/setup.sh)"),
]
PREFIX = ifname("vlclk", longest_suffix="-s4")
HOUR = 3600
DRIFT_ROUNDS_S = 6.0  # three drift rounds (every 2 s): time for a wrong repair to show
# libfaketime reads the offset file on every clock call: serve answers ~30x slower under it (GET
# /grants p50 160 ms against 5.5 ms, load 9), and one POST passed 10 s in CI while four switches
# reconciled. This test is about clocks, not latency: its requests get a minute.
HTTP_S = 60


@pytest.fixture(scope="module")
def stepped_serve(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServeChild, faketime.SteppedClockFile, dict[str, str], str]]:
    """serve under libfaketime driving four bridges; (serve, its clock file, researcher headers,
    access bridge). One for the module: its start and the four switches' reconcile under the
    slowed clock took ~20 s each time, and each test steps the clock relative to where it is and
    watches only its own lane (the forward step's, then the backward step's)."""
    tmp_path = tmp_path_factory.mktemp("clocksteps")
    clock = faketime.SteppedClockFile(tmp_path / "faketime")
    of_port = free_port()
    serve = ServeChild(
        f"sqlite:///{tmp_path / 'clk.db'}",
        tmp_path,
        openflow=("127.0.0.1", of_port),
        tick=0.2,
        security=lab_security_args(),
        env=clock.env(),
        cli=faketime.viplanes_command(),
    )
    op = bootstrap(serve.db_url)
    bridges = [f"{PREFIX}-s{n}" for n in (1, 2, 3, 4)]
    try:
        serve.start(timeout=60)
        for n, br in enumerate(bridges, start=1):
            add_bridge(br, n, f"ssl:127.0.0.1:{of_port}")
        tok = setup_researcher(serve.url, op, max_lanes=5, timeout=HTTP_S)
        yield serve, clock, {"Authorization": f"Bearer {tok}"}, bridges[0]
    finally:
        for br in bridges:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True, timeout=20)
        serve.stop()


def active_lane(serve: ServeChild, h: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:  # 503 switches_not_ready until every switch is reconciled
        r = requests.post(f"{serve.url}/api/v1/lanes", json=body, headers=h, timeout=HTTP_S)
        lane = r.json()
        if r.status_code == 201 and lane["state"] == "active":
            return lane
        assert r.status_code == 503 and lane["error"] == "switches_not_ready", lane
        assert time.monotonic() < deadline, lane
        time.sleep(0.3)


def state_of(serve: ServeChild, h: dict[str, str], lane_id: int) -> str:
    return str(requests.get(f"{serve.url}/api/v1/lanes/{lane_id}", headers=h, timeout=HTTP_S).json()["state"])


def test_a_forward_step_ends_no_lane_and_takes_no_flow(stepped_serve) -> None:
    serve, clock, h, access = stepped_serve
    lane = active_lane(serve, h, lane_body(9000, duration=120))
    flows = lane_flows(access, lane["id"])
    assert flows
    clock.step(+HOUR)
    time.sleep(DRIFT_ROUNDS_S)  # 30 ticks of the scheduler, 3 drift rounds
    assert state_of(serve, h, lane["id"]) == "active"
    assert len(lane_flows(access, lane["id"])) == len(flows), "the lane's flows left the access switch"
    log = serve.log.read_text()
    assert "the wall clock stepped +3600.0 s" in log


def test_a_backward_step_ends_the_lane_at_its_real_end(stepped_serve) -> None:
    serve, clock, h, access = stepped_serve
    duration = 8  # any length shows it: the old clock kept the lane an hour past its end
    lane = active_lane(serve, h, lane_body(9001, duration=duration))
    ends = time.monotonic() + duration  # it started before the answer came: it ends before this
    assert lane_flows(access, lane["id"])
    clock.step(-HOUR)
    time.sleep(max(0.0, ends - time.monotonic()))
    late = time.monotonic() + 15.0  # its real end, a few ticks later on 2 shared cores; the bug was an hour
    at_end = state_of(serve, h, lane["id"])
    while at_end == "active" and time.monotonic() < late:
        time.sleep(0.5)
        at_end = state_of(serve, h, lane["id"])
    time.sleep(DRIFT_ROUNDS_S)  # the drift check must not bring its flows back
    after = {"state at its end": at_end, "flows after 3 drift rounds": len(lane_flows(access, lane["id"]))}
    assert after == {"state at its end": "expired", "flows after 3 drift rounds": 0}
