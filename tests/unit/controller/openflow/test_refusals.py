"""The listener's refusals reach the readiness report (/readyz), so doctor can name the cause of
a switch that is not connected: an unknown dpid (the bridge's datapath id not set) above all."""

from __future__ import annotations

import logging

import pytest

from viplanes.controller.openflow.admission import Admission
from viplanes.controller.openflow.peerauth import SwitchTrust
from viplanes.controller.runtime.lane_runtime import LaneRuntime
from viplanes.controller.runtime.refusals import KEEP, RefusalLog
from viplanes.topologies.model import Topology


class Conn:
    address = ("192.0.2.7", 40000)

    def peer_cert_der(self) -> None:
        return None  # plain TCP: only the topology's dpids count

    def probe(self, timeout_s: float) -> bool:
        return False

    def shutdown(self) -> None:
        pass


def test_an_unknown_dpid_is_recorded_and_logged_with_the_fix(topo: Topology, caplog: pytest.LogCaptureFixture) -> None:
    runtime = LaneRuntime(topo)
    gate = Admission(SwitchTrust(topo), refusals=runtime.refusals)
    with caplog.at_level(logging.WARNING):
        assert not gate.admit(Conn(), 174275879763270)
    assert "other-config:datapath-id" in caplog.text and "s1=0000000000000001" in caplog.text
    (refused,) = runtime.readiness()["refused"]
    assert refused["kind"] == "unknown_dpid" and refused["dpid"] == 174275879763270


def test_a_healthy_report_has_no_refused_key(topo: Topology) -> None:
    assert "refused" not in LaneRuntime(topo).readiness()


def test_the_log_keeps_one_line_per_cause_and_a_bound() -> None:
    log = RefusalLog(clock=lambda: 1.0)
    for _ in range(5):
        log.record("tls", None, "TLS handshake failed: X")
    for n in range(KEEP + 3):
        log.record("unknown_dpid", n, "not in topology")
    items = log.recent()
    assert len(items) == KEEP and items[-1]["dpid"] == KEEP + 2
