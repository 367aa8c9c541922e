"""Settings (off by default, bad values named), the prefilter required when on, and the collector
supervised: a stand-in collector process that prints goflow2 lines and dies is restarted, and its
lines reach the detector."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sightsink import RecordingSink
from viplanes.cli.main import main as cli
from viplanes.detection.sflow.service import SflowDetection, SflowSettings
from viplanes.settings import Settings


def test_off_by_default() -> None:
    s = SflowSettings.from_settings(Settings.from_env({}))
    assert not s.enabled and s.listen == ("127.0.0.1", 6343) and s.prefixes == ()
    assert s.detector.threshold_bps == 50e6


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"VIPLANES_SFLOW_ENABLED": "maybe"}, "VIPLANES_SFLOW_ENABLED"),
        ({"VIPLANES_SFLOW_PREFIXES": "10.0.0.0/8,nonsense"}, "VIPLANES_SFLOW_PREFIXES"),
        ({"VIPLANES_SFLOW_LISTEN": "127.0.0.1:99999"}, "VIPLANES_SFLOW_LISTEN"),
        ({"VIPLANES_SFLOW_THRESHOLD_MBPS": "fast"}, "VIPLANES_SFLOW_THRESHOLD_MBPS"),
        ({"VIPLANES_SFLOW_WINDOW_S": "-1"}, "VIPLANES_SFLOW_WINDOW_S"),
        ({"VIPLANES_SFLOW_MAX_FLOWS": "0"}, "VIPLANES_SFLOW_MAX_FLOWS"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        SflowSettings.from_settings(Settings.from_env(env))


def test_on_without_a_prefilter_is_refused() -> None:
    """Abuse: sFlow on with no prefixes would keep state for every flow of the campus."""
    s = SflowSettings.from_settings(Settings.from_env({"VIPLANES_SFLOW_ENABLED": "1"}))
    with pytest.raises(ValueError, match="VIPLANES_SFLOW_PREFIXES"):
        SflowDetection(s, RecordingSink(), time.monotonic)


def test_serve_refuses_a_bad_setting_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VIPLANES_SFLOW_ENABLED", "1")
    monkeypatch.setenv("VIPLANES_SFLOW_THRESHOLD_MBPS", "fast")
    monkeypatch.setenv("VIPLANES_CONFIG", str(tmp_path / "none.toml"))
    # were the check gone, serve must still stop (no collector), not run forever
    monkeypatch.setenv("VIPLANES_SFLOW_GOFLOW2", str(tmp_path / "no-goflow2"))
    r = CliRunner().invoke(
        cli,
        ["serve", "--dataplane", "memory", "--db", f"sqlite:///{tmp_path}/v.db", "--api", "127.0.0.1:9"],
    )  # refused before it listens
    assert r.exit_code == 78, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: settings: ") and "VIPLANES_SFLOW_THRESHOLD_MBPS" in lines[-1], r.output


FAKE = """
import json, sys
line = {"type": "SFLOW_5", "sampling_rate": 64, "sampler_address": "127.0.0.1", "bytes": 1514,
        "src_addr": "10.1.0.10", "dst_addr": "203.0.113.10", "proto": "TCP", "src_port": 40000, "dst_port": 5201}
for _ in range(50):
    print(json.dumps(line))
print("garbage")
sys.stdout.flush()
"""


def test_collector_is_restarted_and_its_lines_reach_the_detector(tmp_path: Path) -> None:
    fake = tmp_path / "fake_goflow2.py"
    fake.write_text(FAKE)
    s = SflowSettings.from_settings(
        Settings.from_env({"VIPLANES_SFLOW_ENABLED": "1", "VIPLANES_SFLOW_PREFIXES": "10.1.0.0/24"})
    )
    det = SflowDetection(s, RecordingSink(), time.monotonic, wrap=(sys.executable, str(fake)))
    det.collector.settings = type(det.collector.settings)(  # restart fast in the test
        binary=s.goflow2, listen=s.listen, wrap=det.collector.settings.wrap, restart_backoff_s=0.05
    )
    det.start()
    try:
        deadline = time.monotonic() + 10
        while det.collector.restarts < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        det.stop()
    assert det.collector.restarts >= 2
    assert det.stats().samples >= 100  # two runs read whole, a third maybe
    assert det.collector.lines >= det.stats().samples + 2  # the garbage lines were read and dropped
    assert json.loads(json.dumps(det.stats().__dict__))["filtered"] == 0
