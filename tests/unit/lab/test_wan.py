"""The WAN model: the topology's optional `wan:` section and the pacing proxy's token bucket."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.paths import REPO
from viplanes.lab.measure import rclone_argv
from viplanes.lab.wan.proxy import TokenBucket, main, parse_forward
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.model import Wan, WanEndpoint

CAMPUS = REPO / "topologies" / "campus.yaml"


def test_campus_models_the_wan() -> None:
    """The demo's and the lab tests' campus: the caps alone."""
    assert load_topology(CAMPUS).wan == Wan(per_connection_mbps=10, burst_kb=64)


def test_the_paper_campus_adds_the_round_trip_and_storage() -> None:
    """`lab run --paper`'s campus: campus.yaml but for the WAN model."""
    paper = load_topology(REPO / "topologies" / "campus-paper.yaml")
    assert paper.wan == Wan(
        per_connection_mbps=10,
        burst_kb=64,
        rtt_ms=300,
        up_mbps=6,
        down_mbps=16,
        window_kb=4096,
        request_ms=500,
        storage_workers=12,
        read_request_ms=100,
        write_rps=4,
        endpoints=(WanEndpoint("vm", ("ssh", "http"), total_mbps=75),),
    )


def test_without_the_section_the_limit_is_off(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    del data["wan"]
    assert parse_topology(data).wan is None
    data["wan"] = None  # an empty `wan:` too
    assert parse_topology(data).wan is None


def test_burst_defaults(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 2.5}
    assert parse_topology(data).wan == Wan(2.5, 64.0)


@pytest.mark.parametrize(
    "wan, problem",
    [
        ({"per_connection_mbps": 0}, "wan.per_connection_mbps: expected a positive number, got 0"),
        ({"per_connection_mbps": "fast"}, "wan.per_connection_mbps: expected a positive number"),
        ({}, "wan"),
        ({"per_connection_mbps": 10, "burst_kb": 1}, "wan.burst_kb: expected 4..16384 KB, got 1"),
        ({"per_connection_mbps": 10, "latency_ms": 80}, "wan.latency_ms: unknown key"),
        ([10], "wan: expected a mapping"),
    ],
)
def test_bad_wan_sections_are_named(campus_data: dict[str, Any], wan: Any, problem: str) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = wan
    with pytest.raises(TopologyError) as err:
        parse_topology(data, "campus.yaml")
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_bucket_lets_the_burst_through_then_holds_the_rate() -> None:
    bucket = TokenBucket(rate_bps=8e6, burst_bytes=64_000)  # 1 MB/s
    assert bucket.take(64_000, now=0.0) == 0.0  # a full bucket: no wait
    assert bucket.take(100_000, now=0.0) == pytest.approx(0.1)  # in debt: 100 KB at 1 MB/s
    # after waiting that out, the next read waits its own length again
    assert bucket.take(50_000, now=0.1) == pytest.approx(0.05)


def test_bucket_long_run_rate_is_exact_whatever_the_read_sizes() -> None:
    bucket = TokenBucket(rate_bps=10e6, burst_bytes=32_768)
    now, sent = 0.0, 0
    for size in [1, 32_768, 500, 16_000, 32_768] * 200:
        now += bucket.take(size, now)  # a sender that waits exactly as told
        sent += size
    assert sent * 8 / now == pytest.approx(10e6, rel=0.02)


def test_bucket_never_saves_more_than_the_burst() -> None:
    bucket = TokenBucket(rate_bps=8e6, burst_bytes=10_000)
    bucket.take(0, now=0.0)
    assert bucket.take(10_000, now=100.0) == 0.0  # idle for long: still only one burst
    assert bucket.take(1_000_000, now=100.0) == pytest.approx(1.0)


def test_forward_parsing() -> None:
    assert parse_forward("203.0.113.10:9000=127.0.0.1:9001") == ("203.0.113.10", 9000, "127.0.0.1", 9001)
    for bad in ("203.0.113.10:9000", "a:0=b:1", "x=y", ":1=b:2"):
        with pytest.raises(ValueError, match="--forward"):
            parse_forward(bad)


def test_proxy_cli_refuses_bad_input_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--mbps", "0", "--forward", "127.0.0.1:1=127.0.0.1:2"])
    assert exc.value.code == 2
    assert "must be positive" in capsys.readouterr().err


def test_rclone_parts_one_after_another_when_asked() -> None:
    assert "--s3-upload-concurrency" not in rclone_argv("rclone", "a", "b", 4, 8)
    argv = rclone_argv("rclone", "a", "b", 4, 8, upload_concurrency=1)
    assert argv[argv.index("--s3-upload-concurrency") + 1] == "1"
