"""The CLI's transport messages (issue 40): each names what is wrong and what to do, against tiny
real servers on loopback (our own API server, in plain HTTP or TLS, serving a one-line app)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.live import LiveServer
from viplanes import pki
from viplanes.cli.https import server_context
from viplanes.cli.main import main


def whoami_app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({"name": "root", "role": "operator"}).encode()]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and an API certificate naming localhost only (not 127.0.0.1)."""
    d = tmp_path_factory.mktemp("pki")
    pki.init(d, hosts=("localhost",))
    return d


@pytest.fixture
def plain() -> Iterator[LiveServer]:
    server = LiveServer(whoami_app)
    yield server
    server.stop()


@pytest.fixture
def tls(certs: Path) -> Iterator[LiveServer]:
    server = LiveServer(whoami_app, tls=server_context(certs / "controller.crt", certs / "controller.key"))
    yield server
    server.stop()


def whoami(url: str, *extra: str) -> Any:
    return CliRunner().invoke(
        main,
        ["principal", "whoami", "--api-url", url, *extra],
        env={"VIPLANES_TOKEN": "t", "VIPLANES_CONFIG": "/nonexistent", "VIPLANES_CA_FILE": ""},
    )


def one_line(output: str) -> str:
    lines = output.strip().splitlines()
    assert len(lines) == 1, output
    return lines[0]


def test_https_against_a_plain_http_api_says_so_at_once(plain: LiveServer) -> None:
    """Was: a 30.9 s hang, then "ReadTimeout (unreachable)"."""
    url = plain.url.replace("http://", "https://")
    t0 = time.monotonic()
    r = whoami(url)
    line = one_line(r.output)
    assert r.exit_code == 2, r.output
    assert f"{url} answers plain HTTP, not HTTPS: use {plain.url}" in line and "--tls-cert" in line
    assert time.monotonic() - t0 < 12


def test_http_against_the_https_api_says_to_use_https(tls: LiveServer) -> None:
    """Was: "cannot reach ...: ConnectionError (unreachable)"."""
    url = tls.url.replace("https://", "http://")
    r = whoami(url)
    line = one_line(r.output)
    assert r.exit_code == 2, r.output
    assert f"{url} speaks HTTPS, not plain HTTP: use {tls.url}" in line and "--ca-file" in line


def test_a_url_without_a_scheme_says_which_to_write() -> None:
    """Was: "cannot reach 127.0.0.1:8443: InvalidSchema (unreachable)"."""
    r = whoami("127.0.0.1:8443")
    line = one_line(r.output)
    assert r.exit_code == 2, r.output
    assert "needs https://" in line and "--api-url https://127.0.0.1:8443" in line


def test_a_certificate_for_another_name_names_the_host_and_the_fix(tls: LiveServer, certs: Path) -> None:
    """Was: "... is not valid for (give the API's CA with --ca-file)": host cut off, wrong fix."""
    r = whoami(tls.url, "--ca-file", str(certs / "ca.crt"))
    line = one_line(r.output)
    assert r.exit_code == 76, r.output
    assert "not valid for 127.0.0.1 (it names localhost)" in line
    assert "viplanes pki rotate-controller --host 127.0.0.1" in line and "--ca-file" not in line


def test_the_same_api_by_a_name_its_certificate_carries_works(tls: LiveServer, certs: Path) -> None:
    r = whoami(tls.url.replace("127.0.0.1", "localhost"), "--ca-file", str(certs / "ca.crt"))
    assert r.exit_code == 0 and "root (operator)" in r.output, r.output
