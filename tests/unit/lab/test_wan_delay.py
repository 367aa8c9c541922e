"""The WAN model's round trip, asymmetric caps and storage queue: the pure parts and the `wan:` keys."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.paths import REPO
from viplanes.lab.services import wan_options
from viplanes.lab.wan.model import DelayLine, RequestFramer
from viplanes.lab.wan.proxy import Shape, StorageQueue, main
from viplanes.topologies.loader import TopologyError, load_topology, parse_topology
from viplanes.topologies.model import Wan

CAMPUS = REPO / "topologies" / "campus-paper.yaml"  # lab run --paper's campus


def test_the_paper_campus_has_a_round_trip_slower_uploads_and_a_storage_queue() -> None:
    wan = load_topology(CAMPUS).wan
    assert wan is not None
    assert wan.rtt_ms > 0 and wan.request_ms > 0
    assert wan.down >= 1.5 * wan.up  # the provider takes uploads slower than it serves them


def test_new_keys_default_to_the_old_model(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 10}
    wan = parse_topology(data).wan
    assert wan == Wan(10, 64.0)
    assert (wan.up, wan.down, wan.rtt_ms, wan.request_ms) == (10, 10, 0, 0)
    data["wan"] = {"per_connection_mbps": 10, "up_mbps": 2}
    wan = parse_topology(data).wan
    assert wan is not None and (wan.up, wan.down) == (2, 10)


@pytest.mark.parametrize(
    "extra, problem",
    [
        ({"rtt_ms": -1}, "wan.rtt_ms: expected 0..10000 ms, got -1"),
        ({"rtt_ms": "far"}, "wan.rtt_ms: expected 0..10000 ms"),
        ({"rtt_ms": True}, "wan.rtt_ms: expected 0..10000 ms"),
        ({"rtt_ms": float("nan")}, "wan.rtt_ms: expected 0..10000 ms"),
        ({"up_mbps": 0}, "wan.up_mbps: expected a positive number, got 0"),
        ({"down_mbps": -5}, "wan.down_mbps: expected a positive number"),
        ({"window_kb": 1}, "wan.window_kb: expected 16..1048576 KB"),
        ({"request_ms": 120000}, "wan.request_ms: expected 0..60000 ms"),
        ({"storage_workers": 0}, "wan.storage_workers: expected 1..1024 workers"),
        ({"storage_workers": 2.5}, "wan.storage_workers: expected a whole number"),
    ],
)
def test_bad_round_trips_caps_and_queues_are_named(campus_data: dict[str, Any], extra: Any, problem: str) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 10, **extra}
    with pytest.raises(TopologyError) as err:
        parse_topology(data, "campus.yaml")
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_the_proxy_gets_every_setting_and_the_storage_port_only_with_a_queue() -> None:
    wan = Wan(10, 64, rtt_ms=300, up_mbps=8, down_mbps=16, window_kb=512, request_ms=500, storage_workers=12)
    argv = wan_options(wan, 9000)
    pairs = dict(zip(argv[::2], argv[1::2], strict=True))
    assert pairs == {
        "--burst-kb": "64",
        "--up-mbps": "8",
        "--down-mbps": "16",
        "--rtt-ms": "300",
        "--window-kb": "512",
        "--request-ms": "500",
        "--storage-workers": "12",
        "--storage-port": "9000",
    }
    assert "--storage-port" not in wan_options(Wan(10), 9000)


def test_delay_line_holds_each_piece_half_a_round_trip() -> None:
    line = DelayLine(rtt_s=0.2, window_bytes=1_000_000)
    assert line.push(100, now=1.0) == pytest.approx(1.1)
    assert line.push(100, now=1.05) == pytest.approx(1.15)  # order kept, each its own delay


def test_delay_line_window_bounds_a_connection_to_window_over_rtt() -> None:
    """A sender that always fills the window moves window / rtt, whatever its link could do."""
    line = DelayLine(rtt_s=0.1, window_bytes=32 * 1024)
    now, sent = 0.0, 0
    while now < 10.0:
        now += line.wait_for_room(now)
        room = int(line.room(now))
        line.push(room, now)
        sent += room
    assert sent * 8 / now == pytest.approx(32 * 1024 * 8 / 0.1, rel=0.02)


def test_delay_line_gives_the_window_back_a_round_trip_later() -> None:
    line = DelayLine(rtt_s=0.2, window_bytes=1000)
    line.push(1000, now=0.0)
    assert line.room(0.1) == 0 and line.wait_for_room(0.1) == pytest.approx(0.1)
    assert line.room(0.2) == 1000


def test_framer_flags_each_request_head_even_split_across_reads() -> None:
    framer = RequestFramer()
    put = b"PUT /b/k?partNumber=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"
    get = b"GET /b/k HTTP/1.1\r\nHost: x\r\n\r\n"
    stream = put + b"0123456789" + get + put + b"abcdefghij"
    pieces = [p for i in range(0, len(stream), 7) for p in framer.feed(stream[i : i + 7])]
    assert b"".join(p for p, _ in pieces) == stream  # nothing lost, nothing added
    assert [p for p, starts in pieces if starts] == [put, get, put]


def test_framer_does_not_take_body_bytes_for_a_request() -> None:
    """A body that looks like a request (an uploaded HTTP log) must not cost a service time."""
    body = b"GET /evil HTTP/1.1\r\n\r\n"
    head = b"PUT /b/log HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
    pieces = RequestFramer().feed(head + body)
    assert [p for p, starts in pieces if starts] == [head]


@pytest.mark.parametrize(
    "head",
    [
        b"PUT /b/k HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"PUT /b/k HTTP/1.1\r\nContent-Length: lots\r\n\r\n",
        b"PUT /b/k HTTP/1.1\r\nContent-Length: -4\r\n\r\n",
    ],
)
def test_framer_turns_into_a_pipe_when_it_cannot_follow(head: bytes) -> None:
    framer = RequestFramer()
    assert framer.feed(head) == [(head, True)]
    tail = b"GET / HTTP/1.1\r\n\r\n"
    assert framer.feed(tail) == [(tail, False)]  # counted once, never an error


def test_framer_gives_up_on_a_head_that_never_ends() -> None:
    framer = RequestFramer()
    junk = b"A" * (65 * 1024)
    out = framer.feed(junk)
    assert b"".join(p for p, _ in out) == junk and framer.feed(b"x") == [(b"x", False)]


def test_each_connection_gets_its_own_lines_and_the_storage_only_upstream() -> None:
    shape = Shape(8e6, 16e6, 65536, rtt_s=0.3)
    storage = StorageQueue(0.5, 4)
    up, down = shape.directions(storage)
    assert (up.bucket.rate_bps, down.bucket.rate_bps) == (8e6, 16e6)
    assert up.line is not None and down.line is not None and up.line is not down.line
    assert up.storage is storage and down.storage is None and down.framer is None
    up2, _ = Shape(8e6, 16e6, 65536).directions(None)
    assert up2.line is None and up2.storage is None  # no rtt, no queue: the old direct pump


def test_proxy_cli_refuses_negative_delays_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (["--rtt-ms", "-1"], ["--up-mbps", "0"], ["--storage-workers", "0"]):
        with pytest.raises(SystemExit) as exc:
            main(["--mbps", "10", "--forward", "127.0.0.1:1=127.0.0.1:2", *bad])
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "must be" in err, err
