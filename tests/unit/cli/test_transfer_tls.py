"""`viplanes transfer` against the API over HTTPS: ``--ca-file`` names the campus CA (issue 40:
transfer had none, so a campus CA could only come from the config file or the environment)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.live import LiveServer
from tests.support.world import World
from viplanes import pki
from viplanes.cli.https import server_context
from viplanes.cli.transfer import transfer

LANE = ["--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-ports", "9000", "--require-lane", "--", "true"]


@pytest.fixture
def https_live(world: World, tmp_path: Path) -> Iterator[tuple[LiveServer, Path]]:
    pki.init(tmp_path / "pki", hosts=("127.0.0.1",))
    tls = server_context(tmp_path / "pki" / "controller.crt", tmp_path / "pki" / "controller.key")
    server = LiveServer(world.app, tls=tls)
    yield server, tmp_path / "pki" / "ca.crt"
    server.stop()


def run(url: str, world: World, *args: str) -> object:
    return CliRunner().invoke(
        transfer,
        ["--api-url", url, "--token", world.tokens["alice"], *args],
        env={"VIPLANES_CONFIG": "/nonexistent", "VIPLANES_CA_FILE": ""},
    )


def test_transfer_holds_a_lane_over_https_with_ca_file(https_live: tuple[LiveServer, Path], world: World) -> None:
    live, ca = https_live
    r = run(live.url, world, "--ca-file", str(ca), *LANE)
    assert r.exit_code == 0, r.output
    assert " active: 10.1.0.10 -> 203.0.113.10" in r.stderr, r.stderr


def test_transfer_without_the_ca_names_the_fix(https_live: tuple[LiveServer, Path], world: World) -> None:
    live, _ = https_live
    r = run(live.url, world, *LANE)
    assert r.exit_code == 3, r.output
    assert "cannot verify" in r.stderr and "--ca-file" in r.stderr, r.stderr
