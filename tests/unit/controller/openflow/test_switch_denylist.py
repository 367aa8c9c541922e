"""The switch-certificate deny-list (issue 28, item 9): a stolen switch key is shut out without a
new CA or a restart. ``viplanes pki deny`` writes the file; the listener re-reads it on change,
refuses a denied certificate after its TLS handshake, and drops a connected switch using one."""

from __future__ import annotations

import socket
import ssl
import stat
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.fake_switches import client_context
from viplanes import pki
from viplanes.cli.pki import EXIT_BAD_ARGUMENT, EXIT_NOT_DENIED, pki_group
from viplanes.controller.openflow.denylist import DenyList
from viplanes.controller.openflow.tls import TLSFiles
from viplanes.pki import denylist as pki_denylist


def _fp(campus_pki: Path, name: str) -> str:
    return pki.cert_sha256(pki.load_cert(campus_pki / f"switch-{name}.crt"))


def test_deny_list_is_re_read_when_the_file_changes(tmp_path):
    path = tmp_path / "denied"
    deny = DenyList(path)
    assert deny.refresh() == frozenset()  # no file: nothing denied
    fp = "ab" * 32
    pki_denylist.deny(path, fp, "test")
    assert deny.refresh() == {fp}
    path.write_text(f"{fp}\nnot-a-fingerprint\n{'CD:' * 31}CD  # colons and case\n")
    assert deny.refresh() == {fp, "cd" * 32}  # the bad line is skipped, the rest applies
    path.unlink()
    assert deny.refresh() == frozenset()


def test_an_unreadable_deny_list_keeps_the_last_list(tmp_path):
    """A denial never lapses because the file is, for a moment, not a readable file."""
    path = tmp_path / "denied"
    pki_denylist.deny(path, "ab" * 32, "test")
    deny = DenyList(path)
    path.unlink()
    path.mkdir()  # stat works, reading fails
    assert deny.refresh() == {"ab" * 32}


def test_cli_denies_by_fingerprint_or_certificate_lists_and_undenies(campus_pki, tmp_path):
    runner = CliRunner()
    d = tmp_path / "pki"
    d.mkdir()
    cert = campus_pki / "switch-host1.crt"
    r = runner.invoke(pki_group, ["deny", "--dir", str(d), str(cert)])
    assert r.exit_code == 0 and _fp(campus_pki, "host1") in r.output, r.output
    path = pki_denylist.default_path(d)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fp3 = _fp(campus_pki, "host3")
    colons = ":".join(fp3[i : i + 2] for i in range(0, 64, 2)).upper()
    assert runner.invoke(pki_group, ["deny", "--dir", str(d), colons]).exit_code == 0
    again = runner.invoke(pki_group, ["deny", "--dir", str(d), fp3])
    assert again.exit_code == 0 and "already denied" in again.output
    listed = runner.invoke(pki_group, ["denied", "--dir", str(d)])
    assert listed.exit_code == 0
    assert [line.split()[0] for line in listed.output.splitlines()] == [_fp(campus_pki, "host1"), fp3]
    assert str(cert) in listed.output  # the note says what was denied
    assert runner.invoke(pki_group, ["undeny", "--dir", str(d), fp3]).exit_code == 0
    assert set(pki_denylist.read(path)) == {_fp(campus_pki, "host1")}


@pytest.mark.parametrize(
    "args,code,text",
    [
        (["deny", "nonsense"], EXIT_BAD_ARGUMENT, "neither a SHA-256 fingerprint"),
        (["undeny", "ab" * 32], EXIT_NOT_DENIED, "is not on the deny-list"),
    ],
)
def test_cli_bad_deny_arguments_get_one_line_and_their_own_exit_code(tmp_path, args, code, text):
    r = CliRunner().invoke(pki_group, [*args, "--dir", str(tmp_path)])
    assert r.exit_code == code and text in r.output and len(r.output.strip().splitlines()) == 1, r.output


def _listener(campus_pki: Path, deny: Path):
    from os_ken.lib import hub

    from viplanes.controller.openflow.admission import ListenerSecurity
    from viplanes.controller.openflow.server import OpenFlowServer

    files = TLSFiles(campus_pki / "ca.crt", campus_pki / "controller.crt", campus_pki / "controller.key")
    server = OpenFlowServer("127.0.0.1", 0, ListenerSecurity(tls=files, deny_list=deny))
    hub.spawn(server.serve_forever)
    return server


def _connect(server, campus_pki: Path, name: str) -> ssl.SSLSocket:
    ctx = client_context(campus_pki / "ca.crt", campus_pki / f"switch-{name}.crt", campus_pki / f"switch-{name}.key")
    return ctx.wrap_socket(socket.create_connection(server.address, timeout=3))


def _closed_within(tls: ssl.SSLSocket, timeout_s: float) -> float | None:
    """Seconds until the controller closed the connection (reading past its hello), or None."""
    t0 = time.monotonic()
    tls.settimeout(0.2)
    while time.monotonic() - t0 < timeout_s:
        try:
            if tls.recv(1024) == b"":
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except (ssl.SSLError, OSError):
            return time.monotonic() - t0
    return None


def test_a_connected_switch_is_dropped_within_seconds_of_its_denial_and_cannot_return(campus_pki, tmp_path, caplog):
    deny = tmp_path / "denied"
    server = _listener(campus_pki, deny)
    try:
        stolen, other = _connect(server, campus_pki, "host1"), _connect(server, campus_pki, "host3")
        assert stolen.recv(8)[1] == 0 and other.recv(8)[1] == 0  # both through TLS: the hello
        with caplog.at_level("WARNING", logger="viplanes.controller.openflow.server"):
            pki_denylist.deny(deny, _fp(campus_pki, "host1"), "stolen")
            took = _closed_within(stolen, 5.0)
            print(f"denied switch dropped after {took} s")
            assert took is not None and took < 3.0
            assert any("is on the deny-list" in r.getMessage() for r in caplog.records), caplog.text
        assert _closed_within(other, 0.5) is None  # another certificate is not touched
        back = _connect(server, campus_pki, "host1")  # TLS completes, then the controller closes
        assert _closed_within(back, 2.0) is not None
        assert server.admission.refused.get("denied", 0) >= 2
        pki_denylist.undeny(deny, _fp(campus_pki, "host1"))
        again = _connect(server, campus_pki, "host1")
        assert again.recv(8)[1] == 0 and _closed_within(again, 0.5) is None
        for conn in (stolen, other, back, again):
            conn.close()
    finally:
        server.close()


def test_a_deny_list_others_may_write_is_reported(tmp_path, caplog):
    path = tmp_path / "denied"
    pki_denylist.deny(path, "ab" * 32, "test")
    path.chmod(0o666)
    with caplog.at_level("ERROR", logger="viplanes.controller.openflow.admission"):
        assert DenyList(path).refresh() == {"ab" * 32}
    assert "writable by group or others" in caplog.text
