"""The automation settings `viplanes serve` reads: safe defaults, bad values refused in one line."""

from __future__ import annotations

import pytest

from viplanes.auto.service import Automation, AutoSettings, SettingError
from viplanes.settings import Settings


def test_defaults_leave_the_listener_off(monkeypatch):
    for name in ("VIPLANES_FIREFLY_PORT", "VIPLANES_AUTO_QUEUE", "VIPLANES_FIREFLY_RATE"):
        monkeypatch.delenv(name, raising=False)
    s = AutoSettings.from_settings(Settings.from_env())
    assert s.firefly_port == 0 and s.queue_size == 256 and s.firefly_rate == 5.0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("VIPLANES_FIREFLY_PORT", "ten", "expected an integer from 0 to 65535"),
        ("VIPLANES_FIREFLY_PORT", "70000", "expected an integer from 0 to 65535"),
        ("VIPLANES_FIREFLY_RATE", "-1", "expected a number >= 0"),
    ],
)
def test_bad_values_are_one_line(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingError, match=message):
        AutoSettings.from_settings(Settings.from_env())


def test_serve_wires_a_listener_only_when_a_port_is_set(world):
    manager = world.app.extensions["viplanes"].manager
    assert Automation(manager, AutoSettings(), world.clock).listener is None
    auto = Automation(manager, AutoSettings(firefly_port=0, firefly_host="127.0.0.1"), world.clock)
    assert auto.listener is None
    from viplanes.lab.dns import free_udp_port

    on = Automation(manager, AutoSettings(firefly_port=free_udp_port(), firefly_host="127.0.0.1"), world.clock)
    on.start()
    try:
        assert on.listener is not None and on.listener.address[0] == "127.0.0.1"
    finally:
        on.stop()


def test_the_counters_are_prometheus_metrics(world, mono):
    from prometheus_client import CollectorRegistry, generate_latest

    from tests.unit.auto.conftest import sighting
    from viplanes.auto.metrics import AutomationCollector

    auto = Automation(world.app.extensions["viplanes"].manager, AutoSettings(), world.clock)
    auto.acceptor.offer(sighting(src="10.9.9.9"))
    registry = CollectorRegistry()
    registry.register(AutomationCollector(auto))
    text = generate_latest(registry).decode()
    assert 'viplanes_auto_sightings_total{outcome="outside_grant"} 1.0' in text
    assert "viplanes_auto_ended_total 0.0" in text
