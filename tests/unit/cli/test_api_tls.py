"""The API over TLS: a real `viplanes serve` with a certificate from our PKI code, the CLI
verifying it, and plain HTTP refused off loopback (docs/configuration.md, "The API over TLS")."""

from __future__ import annotations

import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from tests.support.procs import free_port, stop_process
from tests.support.serve import VIPLANES, bootstrap
from viplanes import pki
from viplanes.cli.main import main


@pytest.fixture(scope="module")
def https_serve(tmp_path_factory):
    """`viplanes serve` on HTTPS with the controller certificate of `viplanes pki init`."""
    tmp = tmp_path_factory.mktemp("tls")
    pki.init(tmp / "pki", hosts=("localhost", "127.0.0.1"))
    db_url = f"sqlite:///{tmp / 'api.db'}"
    token = bootstrap(db_url)
    port = free_port()
    log = tmp / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                *VIPLANES,
                "serve",
                "--dataplane",
                "memory",
                "--db",
                db_url,
                "--api",
                f"127.0.0.1:{port}",
                "--tls-cert",
                str(tmp / "pki" / "controller.crt"),
                "--tls-key",
                str(tmp / "pki" / "controller.key"),
            ],
            stdout=out,
            stderr=out,
        )
    url = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(f"{url}/api/v1/health", verify=str(tmp / "pki" / "ca.crt"), timeout=2)
            break
        except requests.RequestException:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
    yield url, token, tmp
    stop_process(proc, 10)


def _whoami(url: str, token: str, *extra: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(
        main,
        ["principal", "whoami", "--api-url", url, *extra],
        env={"VIPLANES_TOKEN": token, "VIPLANES_CONFIG": "/nonexistent", "VIPLANES_CA_FILE": "", **(env or {})},
    )


def test_cli_verifies_the_api_certificate_against_the_campus_ca(https_serve):
    url, token, tmp = https_serve
    r = _whoami(url, token, "--ca-file", str(tmp / "pki" / "ca.crt"))
    assert r.exit_code == 0, r.output
    assert "root" in r.output


def test_a_certificate_from_another_ca_is_refused_in_one_line(https_serve, tmp_path):
    """The attack: a machine in the path answers with its own certificate. The CLI must not
    send the token; it stops with one line and exit 76."""
    url, token, _ = https_serve
    pki.init_ca(tmp_path / "other")
    r = _whoami(url, token, "--ca-file", str(tmp_path / "other" / "ca.crt"))
    assert r.exit_code == 76, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "cannot verify" in lines[0] and "--ca-file" in lines[0], r.output


def test_the_system_store_is_the_default_and_does_not_hold_a_campus_ca(https_serve):
    url, token, _ = https_serve
    r = _whoami(url, token)
    assert r.exit_code == 76, r.output


def test_ca_file_from_the_client_table_of_the_config_file(https_serve, tmp_path):
    url, token, tmp = https_serve
    cfg = tmp_path / "viplanes.toml"
    cfg.write_text(f'[client]\nca_file = "{tmp / "pki" / "ca.crt"}"\n')
    r = _whoami(url, token, env={"VIPLANES_CONFIG": str(cfg)})
    assert r.exit_code == 0, r.output


def test_a_stalled_handshake_does_not_stall_the_server(https_serve):
    """The attack: connections opened and left silent (or speaking plain HTTP) before the TLS
    handshake. One accepting thread serves every client; a handshake on it would freeze them all."""
    url, token, tmp = https_serve
    port = int(url.rsplit(":", 1)[1])
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(5)]
    plain = socket.create_connection(("127.0.0.1", port))
    plain.sendall(b"GET /api/v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        t0 = time.monotonic()
        r = requests.get(f"{url}/api/v1/health", verify=str(tmp / "pki" / "ca.crt"), timeout=5)
        assert r.status_code < 500 and time.monotonic() - t0 < 3  # an HTTP answer, at once
        plain.settimeout(5)
        try:
            assert b"HTTP/1.1" not in plain.recv(4096)  # no answer in clear: closed or reset
        except ConnectionResetError:
            pass
    finally:
        for s in (*silent, plain):
            s.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_older_than_1_2_is_refused(https_serve):
    url, _, tmp = https_serve
    port = int(url.rsplit(":", 1)[1])
    ctx = ssl.create_default_context(cafile=str(tmp / "pki" / "ca.crt"))
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(("127.0.0.1", port)) as raw, pytest.raises(ssl.SSLError):
        ctx.wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.mark.parametrize(
    "command", [["serve", "--dataplane", "memory", "--api"], ["api", "--db", "sqlite://", "--listen"]]
)
def test_plain_http_off_loopback_is_refused(command):
    """The attack: `--api 0.0.0.0:8080` and every researcher's token crosses the campus in clear."""
    r = CliRunner().invoke(main, [*command, "0.0.0.0:8080"], env={"VIPLANES_CONFIG": "/nonexistent"})
    assert r.exit_code == 78, r.output
    assert "plain HTTP" in r.output and "--insecure-http" in r.output


def test_insecure_http_override_starts_and_warns(tmp_path):
    port = free_port("0.0.0.0")  # the address it binds: free on loopback alone is not enough
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                *VIPLANES,
                "serve",
                "--dataplane",
                "memory",
                "--db",
                f"sqlite:///{tmp_path / 'x.db'}",
                "--api",
                f"0.0.0.0:{port}",
                "--insecure-http",
            ],
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 30
        while "viplanes: API http://0.0.0.0" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        assert "WARNING" in log.read_text() and "--insecure-http" in log.read_text()
    finally:
        stop_process(proc, 10)


def test_a_mismatched_key_is_one_line(tmp_path: Path):
    pki.init(tmp_path / "a")
    pki.init(tmp_path / "b")
    r = CliRunner().invoke(
        main,
        ["serve", "--dataplane", "memory", "--tls-cert", str(tmp_path / "a" / "controller.crt")]
        + ["--tls-key", str(tmp_path / "b" / "controller.key")],
        env={"VIPLANES_CONFIG": "/nonexistent"},
    )
    assert r.exit_code == 78, r.output
    assert "--tls-cert" in r.output
