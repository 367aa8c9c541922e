"""The fault suite: lanes through `viplanes serve` on a private OVS (its own namespace, its own
ovsdb-server and ovs-vswitchd) survive kills of serve, ovs-vswitchd restarts and restarts across
a scheduled lane's start, with iperf3 running through the lane.

The controller-outage test runs once the compiler answers ARP for lane addresses with switch
flows; ``VIPLANES_FAULTS_FORCE_OUTAGE=1`` runs it anyway (to see today's failure) and
``VIPLANES_FAULTS_OUTAGE_S=60`` makes it the issue's 60 s soak.

Numbers (traffic gap per fault, recovery times) are printed and recorded with
``record_property``; docs/faults.md holds the measured ones and the command to reproduce them.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import time

import pytest
import requests

from tests.support.faultkit import Iperf, api, fault_serve, gaps, lane_body, longest_gap_s, seconds_until
from tests.support.privovs import PrivateOvs
from tests.support.procs import free_port
from tests.support.serve import bootstrap, setup_researcher
from viplanes.controller.compile.cookies import lane_cookie
from viplanes.lab.servechild import ServeChild

pytestmark = pytest.mark.integration
OUTAGE_S = float(os.environ.get("VIPLANES_FAULTS_OUTAGE_S", "15"))


@pytest.fixture
def fault_lab(tmp_path):
    ovs = PrivateOvs()
    of_port = free_port()
    served = fault_serve(ovs, tmp_path, of_port)
    try:
        ovs.start(of_port)
        op = bootstrap(served.db_url)
        served.start()
        token = setup_researcher(served.url, op, max_lanes=20)
        yield ovs, served, token
    finally:
        served.kill()
        ovs.stop()


def _active_lane(served: ServeChild, token: str, **over) -> dict:
    r = api(served, "POST", "/lanes", token, json=lane_body(**over))
    assert r.status_code == 201 and r.json()["state"] == "active", r.text
    return r.json()


def _assert_untouched(before: dict, after: dict, elapsed: float) -> None:
    """Same flows (by cookie and match), not re-added (duration went on), counters never fell."""
    for br in before:
        assert [f["match"] for f in after[br]] == [f["match"] for f in before[br]], br
        for b, a in zip(before[br], after[br], strict=True):
            assert a["duration"] >= b["duration"] + elapsed - 1.0, (br, b, a)
            assert a["n_packets"] >= b["n_packets"] and a["n_bytes"] >= b["n_bytes"], (br, b, a)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_killing_serve_never_touches_lane_flows_or_traffic(fault_lab, sig, record_property):
    ovs, served, token = fault_lab
    lane = _active_lane(served, token)
    cookie = lane_cookie(lane["id"])
    iperf = Iperf(ovs, seconds=12)
    try:
        time.sleep(3)
        before, t_before = ovs.lane_flows(cookie), time.monotonic()
        assert before["s1"] and before["s3"], before
        served.kill(sig)
        time.sleep(3)
        _assert_untouched(before, ovs.lane_flows(cookie), time.monotonic() - t_before)
        ready_s = served.start().ready_after_s
        time.sleep(1.5)  # reconcile has run on every switch (readyz) and the scheduler ticked
        _assert_untouched(before, ovs.lane_flows(cookie), time.monotonic() - t_before)
        report = iperf.result(timeout=30)
    finally:
        iperf.stop()
    gap = longest_gap_s(report)
    record_property("traffic_gap_s", gap)
    record_property("ready_after_restart_s", round(ready_s, 2))
    print(f"\n{signal.Signals(sig).name}: traffic gap {gap} s, ready {ready_s:.2f} s after restart")
    assert gap <= 1.0
    assert api(served, "GET", f"/lanes/{lane['id']}", token).json()["state"] == "active"


def test_ovs_vswitchd_restart_restores_lane_flows(fault_lab, record_property):
    ovs, served, token = fault_lab
    lane = _active_lane(served, token)
    cookie = lane_cookie(lane["id"])
    iperf = Iperf(ovs, seconds=14)
    try:
        time.sleep(2)
        ovs.kill_vswitchd()
        t0 = time.monotonic()
        ovs.start_vswitchd()
        flows_s = seconds_until(lambda: all(ovs.lane_flows(cookie)[br] for br in ("s1", "s2", "s3")), 20)
        report = iperf.result(timeout=40)
    finally:
        iperf.stop()
    assert flows_s is not None, "lane flows not restored by reconcile"
    gap = longest_gap_s(report)
    record_property("flows_restored_s", round(flows_s, 2))
    record_property("traffic_gap_s", gap)
    print(
        f"\novs-vswitchd restart: lane flows back {flows_s:.2f} s after the restart "
        f"({time.monotonic() - t0:.1f} s total), traffic gap {gap} s"
    )
    assert gap <= 10.0
    assert api(served, "GET", f"/lanes/{lane['id']}", token).json()["state"] == "active"


def test_restart_answers_503_until_ready_and_starts_a_scheduled_lane_it_missed(fault_lab, record_property):
    """Issue 10 items 2 and 3: a lane whose start passed while serve was down becomes active when
    its switches are back (not failed with "not connected"), and lane requests before readiness
    get 503 + Retry-After, never 201 with state failed."""
    ovs, served, token = fault_lab
    start = time.time() + 4
    r = api(
        served,
        "POST",
        "/lanes",
        token,
        json=lane_body(start_at=dt.datetime.fromtimestamp(start, dt.UTC).isoformat(), duration=120),
    )
    assert r.status_code == 201 and r.json()["state"] == "scheduled", r.text
    scheduled = r.json()["id"]
    served.kill(signal.SIGKILL)
    time.sleep(max(0.0, start - time.time()) + 1)  # its start passed while serve was down
    served.launch()
    answers: list[tuple[int, str]] = []
    port = 9100
    t0 = time.monotonic()
    # until ready: serve's start plus the switches' reconnect; 20 s ran out at load 9 (all 503s),
    # and how long it takes is not what this test asks (a 500 or a failed lane fails it at once)
    while time.monotonic() - t0 < 60:
        try:
            got = api(served, "POST", "/lanes", token, json=lane_body(port=port, duration=60))
        except Exception:
            time.sleep(0.05)
            continue
        body = got.json()
        answers.append((got.status_code, body.get("state") or body.get("error")))
        if got.status_code == 503:
            assert body["error"] == "switches_not_ready" and got.headers["Retry-After"], body
        else:
            assert got.status_code == 201 and body["state"] == "active", body
            break
        time.sleep(0.02)
    refused = sum(1 for code, _ in answers if code == 503)
    print(f"\nafter restart: {refused} requests answered 503 before the first 201 ({time.monotonic() - t0:.2f} s)")
    record_property("refused_before_ready", refused)
    assert answers and answers[-1] == (201, "active"), answers
    became = seconds_until(
        lambda: api(served, "GET", f"/lanes/{scheduled}", token).json()["state"] in ("active", "failed", "expired"), 10
    )
    lane = api(served, "GET", f"/lanes/{scheduled}", token).json()
    assert became is not None and lane["state"] == "active", lane
    assert ovs.lane_flows(lane_cookie(scheduled))["s1"]


def test_switch_disconnect_keeps_flows_and_gates_requests(fault_lab, record_property):
    """s1 loses the controller (pointed at a dead port: del-controller would flush its flows):
    its lane flows and traffic stay, /readyz and lane requests through s1 say 503 meanwhile."""
    ovs, served, token = fault_lab
    lane = _active_lane(served, token)
    cookie = lane_cookie(lane["id"])
    iperf = Iperf(ovs, seconds=10)
    try:
        time.sleep(1.5)
        before, t_before = ovs.lane_flows(cookie), time.monotonic()
        ovs.vsctl("set-controller", "s1", f"ssl:{ovs.controller_ip}:{free_port()}")
        assert seconds_until(lambda: requests.get(f"{served.url}/readyz", timeout=5).status_code == 503, 10) is not None
        refused = api(served, "POST", "/lanes", token, json=lane_body(port=9001))
        assert refused.status_code == 503 and refused.json()["error"] == "switches_not_ready"
        ready = requests.get(f"{served.url}/readyz", timeout=5)  # counts only: s1 is the one away
        counts = ready.json()
        assert ready.status_code == 503 and counts["switches_total"] - counts["switches_ready"] == 1, counts
        time.sleep(2)
        ovs.vsctl("set-controller", "s1", f"ssl:{ovs.controller_ip}:{served.of_port}")
        back = seconds_until(lambda: requests.get(f"{served.url}/readyz", timeout=5).status_code == 200, 15)
        _assert_untouched(before, ovs.lane_flows(cookie), time.monotonic() - t_before)
        report = iperf.result(timeout=30)
    finally:
        iperf.stop()
    gap = longest_gap_s(report)
    record_property("traffic_gap_s", gap)
    print(f"\nswitch disconnect: traffic gap {gap} s, ready again {back} s after reconnect")
    assert back is not None and gap <= 1.0


def test_lane_expiring_during_an_outage_is_removed_by_hard_timeout_and_marked_expired(fault_lab):
    ovs, served, token = fault_lab
    lane = _active_lane(served, token, duration=6)
    cookie = lane_cookie(lane["id"])
    served.kill(signal.SIGKILL)
    gone = seconds_until(lambda: not any(ovs.lane_flows(cookie).values()), 15, 0.5)
    assert gone is not None, "hard_timeout did not remove the lane's flows"
    served.start()
    marked = seconds_until(lambda: api(served, "GET", f"/lanes/{lane['id']}", token).json()["state"] == "expired", 5)
    assert marked is not None
    print(f"\nexpiry while serve was down: marked expired {marked:.2f} s after ready")


def test_controller_outage_does_not_stop_lane_traffic(fault_lab, record_property):
    """With serve away for OUTAGE_S (15 s here, 60 s in the bench soak) lane traffic shows no gap
    longer than 1 s: the edge router's ARP for the lane address must be answered by flows. Its
    neighbour timers are shortened (refresh every 2-4 s, Linux's default 15-45 s + 5 s), so the
    outage holds several refreshes, counted on the switch's ARP-reply flow."""
    ovs, served, token = fault_lab
    ovs.quick_neighbours("edge")
    _active_lane(served, token)
    iperf = Iperf(ovs, seconds=OUTAGE_S + 8)
    try:
        t0 = time.monotonic()
        time.sleep(2)
        killed = time.monotonic() - t0
        served.kill(signal.SIGKILL)
        answered = _arp_replies(ovs)
        time.sleep(OUTAGE_S)
        answered = _arp_replies(ovs) - answered
        restarted = time.monotonic() - t0
        ready = served.start().ready_after_s
        report = iperf.result(timeout=OUTAGE_S + 30)
    finally:
        iperf.stop()
    gap = longest_gap_s(report)
    record_property("traffic_gap_s", gap)
    print(
        f"\ncontroller away {OUTAGE_S:g} s: traffic gap {gap} s; killed at {killed:.1f} s, "
        f"restarted at {restarted:.1f} s (ready {ready:.1f} s later); gaps >= 0.2 s "
        f"(start, length) {gaps(report)}; ARP requests answered by the switch meanwhile: {answered}"
    )
    record_property("arp_answered_by_flows", answered)
    assert answered >= 2  # the edge router did refresh during the outage, more than once
    assert gap <= 1.0


def _arp_replies(ovs: PrivateOvs) -> int:
    """Packets the border switch's ARP-reply flows (priority 300, controller/compile/shared.py) took."""
    return sum(
        int(line.split("n_packets=", 1)[1].split(",", 1)[0])
        for line in ovs.ofctl("dump-flows", "s3", "arp").splitlines()
        if "priority=300" in line and "n_packets=" in line
    )


def test_flows_deleted_behind_the_controllers_back_come_back_within_seconds(fault_lab, record_property):
    """Issue 10: flows that disagree with the database are put right within seconds, whoever
    deleted them, on a switch that never disconnected (the drift check, controller/runtime/drift.py)."""
    ovs, served, token = fault_lab
    lane = _active_lane(served, token)
    cookie = lane_cookie(lane["id"])
    back = []
    for br, spec in (
        ("s2", f"cookie={cookie:#x}/-1"),  # one lane's flows on a transit switch
        ("s3", "cookie=0x5650000000000000/0xffff000000000000"),  # all of ours
        ("s2", f"cookie={cookie:#x}/-1"),
    ):  # again: the same cached flows re-sent
        time.sleep(1.0)  # every flow there now is >= 1 s old: a re-added one is younger than that
        before = ovs.cookies(br)
        deleted_at = time.monotonic()
        ovs.ofctl("del-flows", br, spec)
        # not "gone right after": the controller hears the deletes (flow-removed) and may re-add
        # them before a dump can see them gone (a fast machine did); their age says they went
        took = seconds_until(lambda br=br, before=before: ovs.cookies(br) >= before, 15)
        assert took is not None, f"{br}: flows not restored ({before - ovs.cookies(br)} missing)"
        since = time.monotonic() - deleted_at
        ages = [f["duration"] for f in ovs.lane_flows(cookie)[br]]
        assert ages and max(ages) <= since + 0.3, f"{br}: the lane's flows were never deleted: {ages}, {since:.2f} s"
        back.append(round(took, 2))
    record_property("flows_back_s", back)
    print(f"\nflows deleted behind serve's back: back after {back} s (s2 lane, s3 all app flows, s2 lane again)")
    assert max(back) <= 6.0
    assert api(served, "GET", f"/lanes/{lane['id']}", token).json()["state"] == "active"
