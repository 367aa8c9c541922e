"""A researcher is told when the lane under ``viplanes transfer`` loses every usable path
(``interrupted``, the reason naming the links) and when it is carried again; ``lane show`` prints
the reason (issue 42)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from sqlalchemy import select

from tests.support.live import LiveServer
from tests.support.world import World
from viplanes.cli.main import main
from viplanes.cli.transfer import transfer
from viplanes.lanes.interruptions import sync_interruptions
from viplanes.store.models import Lane

WHY = "no usable path to the edge: s2:3-s3:3 down (port s3:3 down)"


class ControllerReport:
    """What the controller says it holds, as ``sync_interruptions`` reads it from the data plane."""

    def __init__(self) -> None:
        self.held: dict[int, str] = {}

    def interrupted(self) -> dict[int, str]:
        return dict(self.held)


def _lane_ids(world: World, state: str) -> list[int]:
    with world.app.extensions["viplanes"].db.read() as s:
        return list(s.scalars(select(Lane.id).where(Lane.state == state)))


def _hold_then_return(world: World, go: Path, errors: list[str]) -> None:
    """The scheduler's half, driven by hand: the lane's path fails, then comes back."""
    ctx = world.app.extensions["viplanes"]
    report = ControllerReport()
    deadline = time.monotonic() + 20
    while not _lane_ids(world, "active") and time.monotonic() < deadline:
        time.sleep(0.05)
    active = _lane_ids(world, "active")
    if not active:
        errors.append("the transfer's lane never became active")
        go.touch()
        return
    report.held = {active[0]: WHY}
    sync_interruptions(ctx.db, report, ctx.clock)  # type: ignore[arg-type]
    time.sleep(2.0)  # twenty reads at --watch-every 0.1
    report.held = {}
    sync_interruptions(ctx.db, report, ctx.clock)  # type: ignore[arg-type]
    time.sleep(2.0)
    go.touch()


def test_transfer_says_interrupted_with_the_links_then_resumed(live: LiveServer, world: World, tmp_path: Path) -> None:
    go = tmp_path / "go"
    errors: list[str] = []
    helper = threading.Thread(target=_hold_then_return, args=(world, go, errors), daemon=True)
    helper.start()
    args = ["--api-url", live.url, "--token", world.tokens["alice"], "--watch-every", "0.1"]
    args += ["--src", "10.1.0.10", "--dst", "203.0.113.10", "--dst-ports", "9000", "--"]
    args += ["sh", "-c", f"n=0; while [ ! -e {go} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done"]
    r = CliRunner().invoke(transfer, args)
    helper.join(30)
    assert not errors and r.exit_code == 0, (errors, r.output)
    said = r.stderr
    assert f"interrupted: {WHY}; the command keeps running" in said, said
    assert "resumed: a usable path is back" in said, said
    assert said.index("interrupted:") < said.index("resumed:") < said.index("released"), said


def test_lane_show_prints_an_interrupted_lanes_reason(live: LiveServer, world: World, tmp_path: Path) -> None:
    ctx = world.app.extensions["viplanes"]
    body: dict[str, Any] = {"src_ip": "10.1.0.10", "dst_ip": "203.0.113.10", "dst_port": 9001}
    lane = world.client.post(
        "/api/v1/lanes", json={**body, "protocol": "tcp", "duration_s": 600, "purpose": "t"}, headers=world.h("alice")
    ).get_json()
    report = ControllerReport()
    report.held = {lane["id"]: WHY}
    sync_interruptions(ctx.db, report, ctx.clock)  # type: ignore[arg-type]
    env = {"VIPLANES_API_URL": live.url, "VIPLANES_TOKEN": world.tokens["alice"]}
    env["VIPLANES_CONFIG"] = str(tmp_path / "none.toml")
    r = CliRunner().invoke(main, ["lane", "show", str(lane["id"])], env=env)
    assert r.exit_code == 0, r.output
    fields = [line.partition(" ") for line in r.stdout.splitlines() if line.strip()]
    lines = {key: value.strip() for key, _, value in fields}
    assert lines["state"] == "interrupted" and lines["reason"] == WHY, r.stdout
