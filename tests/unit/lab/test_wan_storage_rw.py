"""The storage model by direction: cached reads, durable writes and the account's write quota.

The `wan:` keys (``read_request_ms``, ``write_rps``), what the proxy is given, which requests
count as reads, the queue's timing (real asyncio sleeps of a few tens of milliseconds) and the
duration estimate under the quota.
"""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from tests.support.paths import REPO
from viplanes.lab.experiments import RunSpec, estimate_s
from viplanes.lab.services import wan_options
from viplanes.lab.wan.model import is_read
from viplanes.lab.wan.proxy import StorageQueue, main
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.model import Wan


def test_the_paper_campus_reads_cheaper_than_it_writes_and_has_a_write_quota() -> None:
    wan = load_topology(REPO / "topologies" / "campus-paper.yaml").wan
    assert wan is not None
    assert 0 < wan.read_ms < wan.request_ms and wan.write_rps > 0


def test_without_the_new_keys_reads_cost_what_writes_do_and_there_is_no_quota(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 10, "request_ms": 500}
    wan = parse_topology(data).wan
    assert wan is not None and (wan.read_ms, wan.write_rps) == (500, 0)
    assert "--read-request-ms" not in wan_options(wan, 9000) and "--write-rps" not in wan_options(wan, 9000)


def test_the_proxy_gets_the_read_time_and_the_quota() -> None:
    argv = wan_options(Wan(10, request_ms=500, read_request_ms=100, write_rps=4), 9000)
    pairs = dict(zip(argv[::2], argv[1::2], strict=True))
    assert (pairs["--request-ms"], pairs["--read-request-ms"], pairs["--write-rps"]) == ("500", "100", "4")
    argv = wan_options(Wan(10, write_rps=2), 9000)  # a quota alone still puts the S3 port behind the queue
    assert "--storage-port" in argv


@pytest.mark.parametrize(
    "extra, problem",
    [
        ({"read_request_ms": -1}, "wan.read_request_ms: expected 0..60000 ms, got -1"),
        ({"read_request_ms": "fast"}, "wan.read_request_ms: expected 0..60000 ms"),
        ({"read_request_ms": True}, "wan.read_request_ms: expected 0..60000 ms"),
        ({"read_request_ms": float("nan")}, "wan.read_request_ms: expected 0..60000 ms"),
        ({"write_rps": -2}, "wan.write_rps: expected 0..10000 writes/s, got -2"),
        ({"write_rps": "many"}, "wan.write_rps: expected 0..10000 writes/s"),
    ],
)
def test_bad_read_times_and_quotas_are_named(campus_data: dict[str, Any], extra: Any, problem: str) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 10, **extra}
    with pytest.raises(TopologyError) as err:
        parse_topology(data, "campus.yaml")
    assert any(problem in p for p in err.value.problems), err.value.problems


@pytest.mark.parametrize(
    "head, read",
    [
        (b"GET /bucket/x HTTP/1.1\r\n\r\n", True),
        (b"HEAD /bucket/x HTTP/1.1\r\n\r\n", True),
        (b"PUT /bucket/x HTTP/1.1\r\n\r\n", False),
        (b"POST /bucket/x?uploads HTTP/1.1\r\n\r\n", False),
        (b"DELETE /bucket/x HTTP/1.1\r\n\r\n", False),
        (b"get /bucket/x HTTP/1.1\r\n\r\n", False),  # methods are case-sensitive: not a read
        (b"GETX /bucket/x HTTP/1.1\r\n\r\n", False),
        (b"\r\nGET /bucket/x HTTP/1.1\r\n\r\n", False),
        (b"", False),  # a head the framer gave up on is charged as a write
    ],
)
def test_only_get_and_head_are_reads(head: bytes, read: bool) -> None:
    assert is_read(head) is read


def _serve_all(queue: StorageQueue, heads: list[bytes]) -> float:
    async def go() -> float:
        started = time.monotonic()
        await asyncio.gather(*(queue.serve(h) for h in heads))
        return time.monotonic() - started

    return asyncio.run(go())


def test_reads_and_writes_hold_a_worker_for_their_own_time() -> None:
    queue = StorageQueue(request_s=0.12, workers=4, read_s=0.02)
    assert _serve_all(queue, [b"GET / HTTP/1.1\r\n\r\n"] * 4) < 0.08
    assert 0.11 <= _serve_all(queue, [b"PUT / HTTP/1.1\r\n\r\n"] * 4) < 0.2


def test_the_write_quota_spaces_writes_from_every_connection_and_spares_reads() -> None:
    queue = StorageQueue(request_s=0.0, workers=64, read_s=0.0, write_rps=50)
    # 11 writes at once at 50 a second: the last admitted 10 x 20 ms after the first
    assert 0.19 <= _serve_all(queue, [b"PUT / HTTP/1.1\r\n\r\n"] * 11) < 0.3
    assert _serve_all(queue, [b"GET / HTTP/1.1\r\n\r\n"] * 11) < 0.05


def test_the_proxy_refuses_a_negative_quota_or_read_time(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--write-rps", "-1"], ["--read-request-ms", "-5"]):
        with pytest.raises(SystemExit) as exit_:
            main(["--forward", "127.0.0.1:1=127.0.0.1:2", "--mbps", "10", *bad])
        assert exit_.value.code == 2
        assert "must be 0 or more" in capsys.readouterr().err


def test_an_upload_under_the_quota_is_estimated_at_least_files_over_rate() -> None:
    spec = RunSpec("dtn", "upload", "default", "rclone", 32, 1, chunk_mb=8, dataset="split50")
    quota = Wan(10, rtt_ms=300, request_ms=500, write_rps=4)
    assert estimate_s(spec, 48, wan=quota) >= 50 / 4
    assert estimate_s(spec, 48, wan=Wan(10, rtt_ms=300, request_ms=500)) < 50 / 4
