"""What the gate costs per datagram (printed with -s; docs/automatic-lanes.md quotes it): an
admitted datagram of 8 samples is checked and forwarded, a refused one only checked."""

from __future__ import annotations

import socket
import time
from ipaddress import ip_address

from tests.support.sflowgen import datagram, flow_sample
from viplanes.detection.sflow.agents import SampleGuard, SamplingSwitch
from viplanes.detection.sflow.gate import SflowGate
from viplanes.detection.sflow.seal import AgentSeal

N = 5000


def test_the_gate_costs_microseconds_per_datagram() -> None:
    agent = ip_address("127.0.0.1")
    guard = SampleGuard([SamplingSwitch("s3", agent, frozenset({agent}), frozenset(), None)])
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as goflow:
        goflow.bind(("127.0.0.1", 0))
        goflow.setblocking(False)
        gate = SflowGate(guard, ("127.0.0.1", 0), goflow.getsockname(), AgentSeal([agent]))
        payload = datagram(
            "127.0.0.1", [flow_sample("198.51.100.30", "203.0.113.10", 1, 5201, 64, seq=i) for i in range(8)]
        )
        try:
            cost = {}
            for name, source in (("admitted", "127.0.0.1"), ("refused", "10.1.0.10")):
                start = time.perf_counter()
                for i in range(N):
                    gate.receive(payload, source)
                    if i % 200 == 0:  # drain, so forwarding never meets a full buffer
                        try:
                            while True:
                                goflow.recv(65535)
                        except BlockingIOError:
                            pass
                cost[name] = (time.perf_counter() - start) / N * 1e6
        finally:
            gate.stop()
    print(
        f"\nsflow gate: {cost['admitted']:.1f} us per admitted datagram of 8 samples, {cost['refused']:.1f} us refused"
    )
    assert gate.forwarded == N and guard.counts["sflow_foreign_source"] == N
    assert cost["admitted"] < 1000 and cost["refused"] < 1000  # generous: a shared 2-core machine
