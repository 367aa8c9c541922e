"""`viplanes controller run --topology` on the lab campus: every switch gets the base flows on
connect, the default path works, and a bypass port drops what no lane carries."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ovs import ovs_problem
from tests.support.paths import REPO
from tests.support.procs import free_port, lab_security_args

pytestmark = pytest.mark.integration


def _flows(lab, switch: str) -> str:
    return lab.switch(switch).cmd(f"ovs-ofctl -O OpenFlow13 dump-flows {lab.bridge(switch)}")


def test_controller_run_installs_base_flows_and_drops_on_bypass(tmp_path: Path) -> None:
    problem = ovs_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
    from viplanes.lab.net import build_network
    from viplanes.topologies.loader import load_topology

    port = free_port()
    log = tmp_path / "controller.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "viplanes.cli.main",
                "controller",
                "run",
                "--listen",
                f"127.0.0.1:{port}",
                "--topology",
                str(REPO / "topologies" / "campus.yaml"),
                *lab_security_args(),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
            env=dict(os.environ),
        )
    lab = None
    try:
        deadline = time.monotonic() + 15
        while "OpenFlow listening" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        lab = build_network(load_topology(REPO / "topologies" / "campus.yaml"), "127.0.0.1", port, shape=False)
        deadline = time.monotonic() + 15
        while len(re.findall(r"reconciled switch", log.read_text())) < 4:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        for sw in ("s1", "s2", "s3", "s4"):
            assert "priority=0 actions=NORMAL" in _flows(lab, sw)
        # proxy-ARP punt at the edge switch, through its packets-per-second meter
        assert re.search(r"arp_op=1 actions=meter:\d+,CONTROLLER", _flows(lab, "s3"))
        desktop = lab.host("desktop")
        assert "0% packet loss" in desktop.cmd("ping -c 2 -W 2 203.0.113.10")  # via fw + nat
        # the desktop's ARP broadcasts were flooded by NORMAL onto the bypass link; the far end
        # dropped them instead of letting them into the edge segment
        drops = re.search(r"n_packets=(\d+).*priority=100,in_port=\S+ actions=drop", _flows(lab, "s3"))
        assert drops and int(drops[1]) > 0
        assert "malformed" not in log.read_text()
    finally:
        if lab is not None:
            lab.stop()
        proc.terminate()
        try:
            assert proc.wait(10) == 0  # SIGTERM is a clean stop
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
