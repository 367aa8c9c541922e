"""The split deployment's automation follows the lease: started when the node becomes master,
stopped when it is not, in order on its own worker (a quick stop-then-start rebinds the firefly
port), and a bad setting stops `controller cluster` before it runs (one line, exit 1)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.world import World
from viplanes.auto.role import AutomationRole
from viplanes.auto.service import AutoSettings
from viplanes.cli.main import main as cli
from viplanes.detection.sflow.service import SflowSettings


def free_udp() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bound(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


def test_it_runs_only_between_start_and_stop(world: World, topo) -> None:
    port = free_udp()
    manager = world.app.extensions["viplanes"].manager
    role = AutomationRole(
        manager, topo, manager.clock, AutoSettings(firefly_port=port, firefly_host="127.0.0.1"), SflowSettings()
    )
    try:
        assert not role.running and not bound(port)  # built, not master: nothing listens
        role.start().result(timeout=10)
        assert role.running and bound(port)
        role.start().result(timeout=10)  # a repeated "master" changes nothing
        role.stop()  # deposed, and master again at once: the port is free again before the new bind
        role.start().result(timeout=10)
        assert role.running and bound(port)
        role.stop().result(timeout=10)
        assert not role.running and not bound(port)
    finally:
        role.close()


def test_a_missing_collector_is_refused_when_built(world: World, topo, tmp_path: Path) -> None:
    manager = world.app.extensions["viplanes"].manager
    with pytest.raises(OSError, match="not found"):
        AutomationRole(
            manager, topo, manager.clock, AutoSettings(), SflowSettings(enabled=True, goflow2=tmp_path / "no")
        )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {"VIPLANES_FIREFLY_PORT": "abc"},
            "error: settings: VIPLANES_FIREFLY_PORT='abc': expected an integer from 0 to 65535",
        ),
        ({"VIPLANES_SFLOW_ENABLED": "1", "VIPLANES_SFLOW_GOFLOW2": "/nonexistent"}, "collector /nonexistent not found"),
    ],
)
def test_controller_cluster_refuses_bad_settings_in_one_line(tmp_path: Path, env: dict, line: str) -> None:
    args = [
        "controller",
        "cluster",
        "--db",
        f"sqlite:///{tmp_path}/c.db",
        "--insecure-tcp",
        "--openflow",
        "127.0.0.1:46653",
    ]
    out = CliRunner().invoke(cli, args, env=env)
    assert out.exit_code == (78 if "settings:" in line else 1) and line in out.output, out.output
