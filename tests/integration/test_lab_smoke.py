"""Lab smoke test: the real campus in Mininet, the real `viplanes serve`, a lane over the API.

Asserts the paper's headline at lab scale (the desktop's upload through a VIP lane is several
times the firewall path's) and that rclone's upload through the lane arrived intact.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.support.labcampus import COUNTERS_S, LANE_OVER_FIREWALL
from tests.support.paths import REPO
from viplanes.lab.datasets import digests
from viplanes.lab.experiments import Runner, RunSpec, session
from viplanes.lab.measure import run_rclone
from viplanes.lab.services import rclone_binary

pytestmark = pytest.mark.integration

TOPOLOGY = REPO / "topologies" / "campus.yaml"
# Measured here: firewall path ~14 Mbit/s (15 Mbit/s DPI cap), lane ~85-90 (100 Mbit/s NIC): ~6x.
# The floor (LANE_OVER_FIREWALL) leaves room for a busy 2-core machine. The WAN model caps each
# connection at 10 Mbit/s (campus.yaml), so it takes 10 or more streams to fill the desktop's NIC.
STREAMS = 16
MIN_RATIO = LANE_OVER_FIREWALL


def bridges() -> set[str]:
    out = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_lane_beats_firewall_and_rclone_upload_arrives_intact(tmp_path: Path) -> None:
    with session(TOPOLOGY, tmp_path, ("split10",), 8, need_lanes=True) as sess:
        run_id = sess.lab.run_id
        ours = {sess.lab.bridge(s.name) for s in sess.topology.switches}
        assert ours <= bridges()
        desktop, nat = sess.lab.host("desktop"), sess.lab.host("nat")
        # the firewall is stateful: the inside may open connections, the outside may not
        assert " 0% packet loss" in desktop.cmd("ping -c1 -W2 10.2.0.2")
        assert "100% packet loss" in nat.cmd("ping -c1 -W1 10.1.0.10")

        runner = Runner(sess, tmp_path / "results.jsonl")
        specs = [RunSpec("desktop", "upload", path, "iperf3", STREAMS, 1, seconds=3) for path in ("default", "lane")]
        default, lane = runner.run_all(specs, lane_duration_s=300)
        assert default["ok"] and lane["ok"], (default["error"], lane["error"])
        assert default["path"] == "default" and lane["path"] == "lane"
        assert lane["lane_id"] and lane["lane_nat_ip"]
        ratio = lane["mbps"] / default["mbps"]
        assert ratio >= MIN_RATIO, f"lane {lane['mbps']:.1f} vs default {default['mbps']:.1f}"

        # rclone through a lane the researcher requests over the API; the lane counts its bytes
        svc = sess.services
        assert sess.stack is not None
        lane_rec = sess.stack.request_lane("10.1.0.10", svc.ip, svc.s3_port, 300, "smoke test")
        ds = sess.datasets["split10"]
        m = run_rclone(
            desktop, svc.rclone_env(), rclone_binary(), str(ds.path), "cloud:lab/smoke", transfers=4, chunk_mb=5
        )
        assert m.ok, m.error
        assert m.bytes == ds.bytes
        assert digests(svc.data_dir / "lab" / "smoke") == digests(ds.path)
        # OVS folds datapath counters into its OpenFlow rules about twice a second: poll a little
        deadline = time.monotonic() + COUNTERS_S
        while True:
            counters = sess.stack.client().call("GET", f"/lanes/{lane_rec['id']}/stats")
            if not counters["available"] or counters["bytes"] >= ds.bytes or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if counters["available"]:  # everything (and the headers) went through the lane
            assert counters["bytes"] >= ds.bytes
        sess.stack.release_lane(lane_rec["id"])
    left = {b for b in bridges() if b.startswith(f"vl{run_id}")}
    assert not left, f"bridges left behind: {left}"
