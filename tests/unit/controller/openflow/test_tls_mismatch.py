"""A switch and a controller of two different PKIs: the listener names the cause and the fix,
and `lab shell` says it from a handshake of its own (issue 29, "a first hour that works")."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import pytest

from tests.support.fake_switches import client_context
from viplanes import pki
from viplanes.controller.openflow import tlsdiag
from viplanes.controller.openflow.tls import TLSFiles
from viplanes.lab.labpki import LabPKI
from viplanes.lab.shellinfo import banner, explain_unconnected, probe_controller, why_not_connected


@pytest.fixture(scope="module")
def lab_pki(tmp_path_factory: pytest.TempPathFactory) -> LabPKI:
    """Another CA, as the lab's: its own controller and "lab vswitchd" certificates."""
    d = tmp_path_factory.mktemp("labpki")
    pki.init(d)
    issued = pki.issue_switch(d, "lab-vswitchd", [])
    return LabPKI(d, issued.sha256)


def _listener(campus_pki: Path):
    from os_ken.lib import hub

    from viplanes.controller.openflow.admission import ListenerSecurity
    from viplanes.controller.openflow.server import OpenFlowServer

    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    server = OpenFlowServer("127.0.0.1", 0, ListenerSecurity(tls=files, deny_list=campus_pki / "denied"))
    hub.spawn(server.serve_forever)
    return server


def _logged(caplog: pytest.LogCaptureFixture, needle: str, timeout_s: float = 5.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for rec in caplog.records:
            if needle in rec.getMessage():
                return rec.getMessage()
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not logged: {caplog.text}")


def _try(server, ctx: ssl.SSLContext) -> None:
    try:
        with ctx.wrap_socket(socket.create_connection(server.address, timeout=3)) as tls:
            tls.settimeout(1)
            tls.recv(8)
    except (ssl.SSLError, OSError):
        pass


def test_listener_names_cause_and_fix_of_a_switch_of_another_pki(campus_pki, lab_pki, caplog):
    server = _listener(campus_pki)
    try:
        with caplog.at_level("WARNING"):
            # the lab's switch trusts the lab CA, not the campus controller's: it alerts unknown_ca
            _try(server, client_context(lab_pki.ca, lab_pki.vswitchd_cert, lab_pki.vswitchd_key))
            line = _logged(caplog, "TLSV1_ALERT_UNKNOWN_CA")
            assert "does not trust the controller's certificate" in line and "viplanes.lab.labpki" in line
            # a switch whose certificate the campus CA did not sign
            _try(server, client_context(campus_pki / "ca.crt", lab_pki.vswitchd_cert, lab_pki.vswitchd_key))
            line = _logged(caplog, "CERTIFICATE_VERIFY_FAILED")
            assert "not signed by the campus CA" in line and "pki switch" in line
    finally:
        server.close()


def test_lab_shell_probe_names_the_mismatch_with_someone_elses_controller(campus_pki, lab_pki):
    server = _listener(campus_pki)
    try:
        reason = probe_controller(*server.address, lab_pki)
        assert reason == "CERTIFICATE_VERIFY_FAILED"
        [line] = why_not_connected(None, reason)
        assert "not signed by the lab CA" in line and "$(.venv/bin/python -m viplanes.lab.labpki)" in line
    finally:
        server.close()


def test_lab_shell_reads_its_own_serve_log(tmp_path):
    log = tmp_path / "serve.log"
    log.write_text(
        "WARNING refusing OpenFlow connection from ('127.0.0.1', 1): TLS handshake failed: TLSV1_ALERT_UNKNOWN_CA\n" * 3
    )
    lines = explain_unconnected("switches vl1s1 did not connect to the controller within 15s", log, ("127.0.0.1", 1))
    assert len(lines) == 1 and lines[0].startswith("TLSV1_ALERT_UNKNOWN_CA: the switch does not trust")
    assert explain_unconnected("some other error", log, ("127.0.0.1", 1)) == []


def test_unknown_reasons_are_not_guessed():
    assert tlsdiag.explain("SOMETHING_NEW") is None
    assert tlsdiag.diagnose_log("TLS handshake failed: SOMETHING_NEW") == []


def test_the_shell_prints_tokens_and_console_last():
    from viplanes.topologies.loader import load_topology

    topo = load_topology(Path(__file__).resolve().parents[4] / "topologies/campus.yaml")
    text = banner(topo, "http://127.0.0.1:8081", "RTOKEN", "OTOKEN")
    lines = text.splitlines()
    assert lines[-3:] == [
        "console: http://127.0.0.1:8081/ui/  (sign in with a token below)",
        "researcher: export VIPLANES_API_URL=http://127.0.0.1:8081 VIPLANES_TOKEN=RTOKEN",
        "operator token: OTOKEN",
    ]
    assert any("mininet> sh " in x and "lane request --src 10.1.0.10 --dst 203.0.113.10" in x for x in lines)
    assert any(x.startswith("  mininet> desktop iperf3 -c 203.0.113.10 -p 5201 -P 10") for x in lines)


def test_with_someone_elses_controller_the_shell_does_not_claim_a_token():
    from viplanes.topologies.loader import load_topology

    topo = load_topology(Path(__file__).resolve().parents[4] / "topologies/campus.yaml")
    text = banner(topo, None, None, None)
    assert "already in this shell" not in text and "export VIPLANES_API_URL and VIPLANES_TOKEN first" in text
