"""``controller cluster`` builds its lane service from the same settings as the API processes
(issue 43): the master's DNS name watcher re-resolves in the ``VIPLANES_DNS_TTL_*`` window and
refuses lanes over ``VIPLANES_MAX_LANE_MATCHES``, not in built-in defaults."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import viplanes.cluster.node as node_module
from viplanes.cli.main import main as cli
from viplanes.lanes.manager import LaneManager


class _CapturingNode:
    """Stands in for ControllerNode: keeps the lane service it is handed, then refuses to start,
    so the command stops before any switch or lease is touched."""

    seen: list[LaneManager] = []

    def __init__(
        self, _db: Any, _plane: Any, manager: LaneManager, _tick: float, automation: Any, *, roles: Any
    ) -> None:
        self.seen.append(manager)
        self.automation = automation

    def start(self) -> None:
        raise RuntimeError("stopped by the test")


def test_the_controller_lane_service_takes_the_dns_window_and_match_limit_from_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _CapturingNode.seen = []
    monkeypatch.setattr(node_module, "ControllerNode", _CapturingNode)
    env = {
        "VIPLANES_CONFIG": "/nonexistent",
        "VIPLANES_DNS_TTL_FLOOR_S": "7",
        "VIPLANES_DNS_TTL_CAP_S": "90",
        "VIPLANES_MAX_LANE_MATCHES": "9",
    }
    args = ["controller", "cluster", "--db", f"sqlite:///{tmp_path}/c.db", "--insecure-tcp"]
    args += ["--openflow", "127.0.0.1:46654"]
    out = CliRunner().invoke(cli, args, env=env)
    assert "stopped by the test" in out.output, out.output
    assert len(_CapturingNode.seen) == 1, out.output
    limits = _CapturingNode.seen[0].limits
    assert (limits.ttl_floor_s, limits.ttl_cap_s, limits.max_matches) == (7.0, 90.0, 9)
