"""The collector's start waits for goflow2's bind (viplanes/detection/sflow/bound.py): a datagram the
gate forwards before the bind is lost, which is how a CI run lost every sample of a burst."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from viplanes.detection.sflow.bound import bound, socket_inodes, udp_inodes, wait_bound
from viplanes.detection.sflow.detector import Detector, DetectorSettings
from viplanes.detection.sflow.goflow import CollectorProcess, CollectorSettings, free_udp_port

TABLE = """   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  311: 0100007F:18BB 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0
  312: 00000000:0044 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 77 2 0000000000000000 0
  313: garbage
"""

# binds the port given after a pause, then waits to be ended
LATE = """
import socket, sys, time
time.sleep(float(sys.argv[2]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
time.sleep(60)
"""


class Drop:
    def offer(self, _sighting: object) -> None:
        return None


def test_the_table_gives_the_inodes_on_a_port() -> None:
    assert udp_inodes(TABLE, 6331) == {4242}  # 0x18BB
    assert udp_inodes(TABLE, 68) == {77}
    assert udp_inodes(TABLE, 6343) == set()
    assert socket_inodes(["socket:[4242]", "pipe:[9]", "/dev/null", "socket:[x]"]) == {4242}


def test_a_port_bound_by_another_process_is_not_the_childs() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            assert bound(os.getpid(), port)
            assert not bound(child.pid, port)
        finally:
            child.kill()
            child.wait()


def test_wait_bound_returns_after_the_bind_and_stops_when_the_child_exits() -> None:
    port = free_udp_port()
    child = subprocess.Popen([sys.executable, "-c", LATE, str(port), "0.6"])
    try:
        t0 = time.monotonic()
        assert wait_bound(child.pid, port, 10.0, lambda: child.poll() is None)
        assert time.monotonic() - t0 >= 0.5
    finally:
        child.kill()
        child.wait()
    t0 = time.monotonic()
    assert not wait_bound(child.pid, port, 10.0, lambda: child.poll() is None)
    assert time.monotonic() - t0 < 1.0


def test_start_returns_once_the_collector_listens(tmp_path: Path) -> None:
    late = tmp_path / "late_goflow2.py"
    late.write_text(LATE)
    port = free_udp_port()
    # goflow2's own argv follows the wrap; the fake reads only the port and the pause
    wrap = (sys.executable, str(late), str(port), "0.8")
    settings = CollectorSettings(binary=tmp_path / "unused", listen=("127.0.0.1", port), wrap=wrap)
    detector = Detector(Drop(), lambda _s, _d: True, DetectorSettings())
    collector = CollectorProcess(detector, time.monotonic, settings)
    t0 = time.monotonic()
    collector.start()
    try:
        pid = collector.pid()
        assert pid is not None
        assert bound(pid, port), f"start() returned after {time.monotonic() - t0:.2f} s, before the bind"
    finally:
        collector.stop()
