"""`viplanes serve` with detection on (VIPLANES_SFLOW_*): goflow2 started and read, a sighting
logged for a sampled elephant inside the prefixes, nothing for forged floods outside them or for
garbage datagrams, and goflow2 gone when serve stops. The datagrams are made by hand
(tests/support/sflowgen.py), as anyone on the network could send them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.procs import free_port
from tests.support.serve import Serve
from tests.support.sflowgen import datagram, flow_sample, send
from viplanes.sampling.goflow import GOFLOW2_CACHED

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GOFLOW2_CACHED.exists(), reason="goflow2 not built (make setup)"),
]


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def test_serve_sights_an_elephant_and_ignores_forgeries(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "VIPLANES_CONFIG": str(tmp_path / "none.toml"),
        "VIPLANES_SFLOW_ENABLED": "1",
        "VIPLANES_SFLOW_LISTEN": f"127.0.0.1:{port}",
        "VIPLANES_SFLOW_PREFIXES": "10.1.0.0/24",
        "VIPLANES_SFLOW_THRESHOLD_MBPS": "10",
    }
    serve = Serve(f"sqlite:///{tmp_path}/v.db", tmp_path, env=env).start()
    try:
        assert serve.proc is not None
        collectors = [c for c in _children(serve.proc.pid) if "goflow2" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(collectors) == 1
        target = ("127.0.0.1", port)
        send(target, os.urandom(700))  # garbage: goflow2 drops it and lives
        send(target, b"\x00\x00\x00\x05" + os.urandom(300))
        seq = 1
        for burst in range(40):  # 40 x 5 samples of one flow at 1 in 64 over 0.4 s: ~150 Mbit/s
            outside = [flow_sample("172.16.0.5", "198.51.100.9", 1024 + burst, 6000, 1 << 20, seq=seq)]
            inside = [flow_sample("10.1.0.10", "203.0.113.10", 40000, 5201, 64, seq=seq + i) for i in range(5)]
            send(target, datagram("192.0.2.1", inside + outside, seq=burst))
            seq += 6
            time.sleep(0.01)
        deadline = time.monotonic() + 10
        text = ""
        while time.monotonic() < deadline:
            text = serve.log.read_text()
            if "sflow: sflow 10.1.0.10:40000 -> 203.0.113.10:5201" in text:
                break
            time.sleep(0.1)
        assert "sflow: sflow 10.1.0.10:40000 -> 203.0.113.10:5201 proto 6" in text, text[-2000:]
        assert "(agent 192.0.2.1)" in text
        assert "172.16.0.5" not in text
    finally:
        serve.stop()
    assert not Path(f"/proc/{collectors[0]}").exists() or "zombie" in Path(f"/proc/{collectors[0]}/status").read_text()
