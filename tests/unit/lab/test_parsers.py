"""Parsers for iperf3 JSON and rclone JSON logs, on outputs captured from real lab runs."""

from __future__ import annotations

import json

import pytest

from tests.support.paths import UNIT_FIXTURES
from viplanes.lab.measure import (
    MeasureError,
    iperf3_argv,
    mbps,
    parse_iperf3_json,
    parse_rclone_jsonlog,
    rclone_argv,
    rclone_messages,
)

FIX = UNIT_FIXTURES / "lab"


def fixture(name: str) -> str:
    return (FIX / name).read_text()


def test_iperf3_upload_single_stream():
    res = parse_iperf3_json(fixture("iperf3_upload_P1.json"))
    raw = json.loads(fixture("iperf3_upload_P1.json"))["end"]["sum_received"]
    assert res.streams == 1 and res.reverse is False
    assert res.bytes == raw["bytes"] > 0
    assert res.mbps == pytest.approx(res.bytes * 8 / res.seconds / 1e6, rel=0.01)
    assert res.retransmits is not None and res.retransmits >= 0


def test_iperf3_download_four_streams_reads_receiver_side():
    res = parse_iperf3_json(fixture("iperf3_download_P4_reverse.json"))
    raw = json.loads(fixture("iperf3_download_P4_reverse.json"))["end"]
    assert res.streams == 4 and res.reverse is True
    assert res.bytes == raw["sum_received"]["bytes"]
    assert res.bytes < raw["sum_sent"]["bytes"]  # what arrived, not what left


def test_iperf3_error_is_reported_not_parsed_as_zero():
    with pytest.raises(MeasureError, match="Connection refused"):
        parse_iperf3_json(fixture("iperf3_refused.json"))


@pytest.mark.parametrize("text", ["", "iperf3: error - unable to connect", "{}", "[1, 2]"])
def test_iperf3_garbage_raises(text):
    with pytest.raises(MeasureError):
        parse_iperf3_json(text)


def test_rclone_upload_stats():
    stats = parse_rclone_jsonlog(fixture("rclone_upload_jsonlog.txt"))
    copied = [line for line in fixture("rclone_upload_jsonlog.txt").splitlines() if "Copied (new)" in line]
    assert stats.transfers == len(copied) == 4
    assert stats.bytes == sum(json.loads(line)["size"] for line in copied)
    assert stats.errors == 0 and stats.last_error is None
    assert 0 < stats.elapsed_s < 60


def test_rclone_download_stats():
    stats = parse_rclone_jsonlog(fixture("rclone_download_jsonlog.txt"))
    assert stats.transfers == 4 and stats.bytes == 4 * 4 * 2**20 and stats.errors == 0


def test_rclone_failure_keeps_the_reason():
    text = fixture("rclone_upload_refused_jsonlog.txt")
    stats = parse_rclone_jsonlog(text)
    assert stats.errors == 1 and stats.bytes == 0
    assert "connection refused" in (stats.last_error or "")
    assert any("Failed to copy" in m for m in rclone_messages(text, "warning"))


def test_rclone_without_stats_raises():
    with pytest.raises(MeasureError):
        parse_rclone_jsonlog(fixture("rclone_upload_oneline.txt"))  # not a JSON log


def test_mbps_and_argv():
    assert mbps(12_500_000, 1.0) == pytest.approx(100.0)
    assert mbps(1, 0.0) == 0.0
    argv = iperf3_argv("203.0.113.10", 5201, 8, 5, download=True)
    assert argv[-1] == "-R" and argv[argv.index("-P") + 1] == "8"
    argv = rclone_argv("rclone", "/src", "cloud:lab/x", 16, 8)
    assert argv[argv.index("--transfers") + 1] == "16"
    assert argv[argv.index("--s3-chunk-size") + 1] == "8M"
    assert argv[argv.index("--s3-upload-cutoff") + 1] == "8M"


@pytest.mark.parametrize(
    "error", ["the server is busy running a test. try again later", "control socket has closed unexpectedly"]
)
def test_iperf3_retries_a_run_the_server_was_not_ready_for(monkeypatch, error):
    from viplanes.lab import measure

    answers = [json.dumps({"start": {}, "intervals": [], "end": {}, "error": error}), fixture("iperf3_upload_P1.json")]
    calls: list[list[str]] = []
    monkeypatch.setattr(measure, "_run", lambda host, argv, timeout: (calls.append(argv) or answers.pop(0), "", 0))
    monkeypatch.setattr(measure.time, "sleep", lambda s: None)
    got = measure.run_iperf3(None, "203.0.113.10", 5201, 1, 3, False)
    assert got.ok and got.bytes > 0 and len(calls) == 2


def test_iperf3_does_not_retry_other_errors_or_a_run_that_measured(monkeypatch):
    from viplanes.lab import measure

    broke_midway = json.loads(fixture("iperf3_upload_P1.json"))
    broke_midway["error"] = "control socket has closed unexpectedly"
    for out in (fixture("iperf3_refused.json"), json.dumps(broke_midway)):
        calls: list[int] = []
        monkeypatch.setattr(
            measure, "_run", lambda host, argv, timeout, o=out, calls=calls: (calls.append(1) or o, "", 0)
        )
        got = measure.run_iperf3(None, "203.0.113.10", 5201, 1, 3, False)
        assert not got.ok and got.error and len(calls) == 1
