"""The collector's life (issue 41): goflow2 dies with the process that started it, its restart
back-off starts over after a stable run, and only what the gate forwarded counts (a datagram sent
straight to goflow2's loopback port makes no sample: seal.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from ipaddress import ip_address
from pathlib import Path

from tests.support.clock import FakeClock
from tests.support.paths import REPO
from tests.support.procs import wait_for
from tests.support.sflowgen import datagram, flow_sample
from tests.support.sightsink import RecordingSink
from viplanes.auto.sflowwire import sampling_switches
from viplanes.detection.sflow import goflow
from viplanes.detection.sflow.agents import SampleGuard, datagram_agent
from viplanes.detection.sflow.detector import Detector, DetectorSettings
from viplanes.detection.sflow.goflow import CollectorProcess, CollectorSettings
from viplanes.detection.sflow.seal import AgentSeal
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.topologies.loader import parse_topology

DTN, CLOUD = "198.51.100.30", "203.0.113.10"

PARENT = """
import sys, time
from viplanes.detection.sflow.detector import Detector
from viplanes.detection.sflow.goflow import CollectorProcess, CollectorSettings
from tests.support.sightsink import RecordingSink
det = Detector(RecordingSink(), lambda s, d: True)
c = CollectorProcess(det, time.monotonic, CollectorSettings(wrap=(sys.executable, "-c", "import time; time.sleep(60)"), ready_s=0.1))
c.start()
print(c.pid(), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_parent_leaves_no_collector_behind() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, cwd=REPO, text=True)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=5)
        deadline = time.monotonic() + 2
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), f"collector {child} outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_the_restart_back_off_starts_over_after_a_stable_run(monkeypatch, tmp_path: Path) -> None:
    """Three quick crashes double the wait (0.05, 0.1, 0.2); a fourth run longer than STABLE_S
    makes the next wait the first one again, not 0.4 s. How long a run lasted is read from a
    clock the test moves (the fourth run only), so a slow process start under load is no run."""
    counter, go = tmp_path / "runs", tmp_path / "go"
    counter.write_text("0")
    # a shell, not Python: five quick starts; $0 counts the runs, the fourth waits for $1 (30 s at most)
    script = (
        'n=$(cat "$0"); echo $((n + 1)) > "$0"; i=0; '
        'while [ "$n" = 3 ] && [ ! -e "$1" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i + 1)); done'
    )
    uptime = FakeClock(0.0)
    settings = CollectorSettings(wrap=("sh", "-c", script, str(counter), str(go)), restart_backoff_s=0.05, ready_s=0.1)
    c = CollectorProcess(Detector(RecordingSink(), lambda _s, _d: True), time.monotonic, settings, uptime=uptime)
    waits: list[float] = []
    original = c._stopping.wait

    def recording_wait(timeout: float | None = None) -> bool:
        waits.append(timeout or 0.0)
        return original(timeout)

    monkeypatch.setattr(c._stopping, "wait", recording_wait)
    c.start()
    try:
        assert wait_for(lambda: c.restarts >= 3, 20), f"the fourth run never started: {waits}"
        uptime.advance(goflow.STABLE_S)  # the fourth run, started, has now run STABLE_S
        go.touch()
        assert wait_for(lambda: len(waits) >= 4, 20), waits
    finally:
        c.stop()
    assert waits[:4] == [0.05, 0.1, 0.2, 0.05], waits


def _campus() -> SampleGuard:
    import yaml

    data = yaml.safe_load((REPO / "topologies" / "campus.yaml").read_text())
    for sw in data["switches"]:
        sw.pop("sflow", None)
        if sw["name"] == "s3":
            sw["sflow"] = {"agent": "192.0.2.3", "ifindex": {4: 104}}
    return SampleGuard(sampling_switches(parse_topology(data)))


def _line(agent: str) -> bytes:
    doc = {"type": "SFLOW_5", "sampling_rate": 64, "sampler_address": agent, "bytes": 1514, "in_if": 104}
    doc |= {"src_addr": DTN, "dst_addr": CLOUD, "proto": "TCP", "src_port": 40000, "dst_port": 9100}
    return json.dumps(doc).encode() + b"\n"


def test_a_datagram_sent_straight_to_goflow2_makes_no_sighting() -> None:
    """goflow2 reports the agent written in the datagram; a local user who sends s3's agent
    address straight to goflow2's port got an active lane for the DTN (issue 41). Only the
    gate's sealed agent address counts now."""
    settings = SflowSettings(enabled=True, detector=DetectorSettings(threshold_bps=1e6, min_samples=4))
    for forged, want in ((True, 0), (False, 1)):
        sink = RecordingSink()
        det = SflowDetection(settings, sink, lambda: 100.0, prefilter=lambda _s, _d: True, guard=_campus())
        assert det.seal is not None and det.gate is not None
        try:
            sealed = det.seal.seal(datagram("192.0.2.3", [flow_sample(DTN, CLOUD, 40000, 9100, 64)]))
            assert sealed is not None
            agent = "192.0.2.3" if forged else str(datagram_agent(sealed))
            det.collector._read(io.BytesIO(_line(agent) * 200))
            assert len(sink.sightings) == want
            assert det.guard is not None and det.guard.counts["sflow_ungated"] == (200 if forged else 0)
        finally:
            det.gate.stop()


def test_the_seal_is_secret_and_round_trips() -> None:
    a, b = AgentSeal([ip_address("192.0.2.3")]), AgentSeal([ip_address("192.0.2.3")])
    raw = datagram("192.0.2.3", [flow_sample(DTN, CLOUD, 40000, 9100, 64)])
    sealed_a, sealed_b = a.seal(raw), b.seal(raw)
    assert sealed_a is not None and sealed_b is not None
    agent_a = datagram_agent(sealed_a)
    assert agent_a != datagram_agent(sealed_b)  # random per process
    assert a.unseal(agent_a) == ip_address("192.0.2.3") and b.unseal(agent_a) is None
    assert a.unseal(ip_address("192.0.2.3")) is None  # the plain agent is not believed
    assert a.seal(datagram("192.0.2.99", [])) is None
