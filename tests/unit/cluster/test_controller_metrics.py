"""``controller cluster --metrics``: the split deployment's master shows the automation
counters (forged fireflies, refused sFlow) that ``serve`` shows on the API's /metrics; a
standby says it is one. Served over TLS off loopback, never plain HTTP there (exit 78)."""

from __future__ import annotations

import ssl
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry, generate_latest

from viplanes.cli.main import main
from viplanes.cluster.metrics import ControllerCollector, MetricsServer


class Plane:
    def __init__(self, master: bool) -> None:
        self.is_master, self.epoch = master, 7 if master else 0

    def readiness(self) -> dict[str, Any]:
        return {
            "switches": [
                {"name": "s1", "connected": True, "reconciled": True},
                {"name": "s2", "connected": False, "reconciled": False},
            ]
        }


class Auto:
    """What AutomationCollector reads of a running ``Automation``."""

    def __init__(self) -> None:
        self.acceptor = type(
            "A",
            (),
            {"counts": Counter({"lanes": 1, "spoofed_firefly": 3}), "nat_held": 2, "refreshes": 4, "indexed_grants": 1},
        )()
        self.ender = type("E", (), {"ended": 2})()
        self.listener = type("L", (), {"counts": Counter({"accepted": 1, "bad_json": 4})})()


class Role:
    def __init__(self, running: bool) -> None:
        self.automation: Any = Auto() if running else None
        self.detection: Any = None


def scrape(plane: Plane, role: Role) -> str:
    registry = CollectorRegistry()
    registry.register(ControllerCollector(plane, role))  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def test_the_master_shows_its_role_switches_and_automation_counters() -> None:
    text = scrape(Plane(True), Role(True))
    assert "viplanes_controller_master 1.0" in text and "viplanes_controller_epoch 7.0" in text
    assert 'viplanes_controller_switch_connected{switch="s2"} 0.0' in text
    assert (
        'viplanes_auto_sightings_total{outcome="spoofed_firefly"} 3.0' in text and "viplanes_auto_nat_held 2.0" in text
    )
    assert 'viplanes_firefly_datagrams_total{outcome="bad_json"} 4.0' in text


def test_a_standby_says_so_and_has_no_automation() -> None:
    text = scrape(Plane(False), Role(False))
    assert "viplanes_controller_master 0.0" in text
    assert "viplanes_auto_sightings" not in text


def test_served_over_tls_with_the_given_certificate(campus_pki: Path) -> None:
    registry = CollectorRegistry()
    registry.register(ControllerCollector(Plane(True), Role(True)))  # type: ignore[arg-type]
    server = MetricsServer("127.0.0.1", 0, registry, campus_pki / "controller.crt", campus_pki / "controller.key")
    try:
        ctx = ssl.create_default_context(cafile=str(campus_pki / "ca.crt"))
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{server.port}/metrics", context=ctx, timeout=5) as r:
            assert b"viplanes_controller_master 1.0" in r.read()
    finally:
        server.stop()


def invoke(*args: str) -> Any:
    return CliRunner().invoke(
        main, ["controller", "cluster", "--db", "sqlite://", *args], env={"VIPLANES_CONFIG": "/nonexistent"}
    )


def test_plain_http_off_loopback_is_refused_before_anything_starts() -> None:
    """The attack: `--metrics 0.0.0.0:9108` and anyone on the campus reads which switches are
    down and which forgeries were tried."""
    r = invoke("--metrics", "0.0.0.0:9108")
    assert r.exit_code == 78, r.output
    assert "plain HTTP off loopback" in r.output and "--metrics-tls-cert" in r.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--metrics", "127.0.0.1"], "--metrics"),
        (["--metrics", "127.0.0.1:9108", "--metrics-tls-cert", "setup.py"], "go together"),
        (["--metrics", "127.0.0.1:9108", "--metrics-tls-cert", "setup.py", "--metrics-tls-key", "setup.py"], "78"),
    ],
)
def test_bad_metrics_options_get_one_line(args: list[str], says: str) -> None:
    r = invoke(*args)
    if says == "78":
        assert r.exit_code == 78 and "--metrics-tls-cert setup.py" in r.output, r.output
    else:
        assert r.exit_code == 2 and says in r.output, r.output
    assert "Traceback" not in r.output
