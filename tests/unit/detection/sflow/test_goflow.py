"""goflow2's JSON lines -> samples; anything else (forged, truncated, huge) is dropped quietly."""

from __future__ import annotations

import json
from ipaddress import ip_address
from pathlib import Path

from viplanes.detection.sflow.goflow import MAX_LINE, goflow2_argv, parse_line

LINE = {
    "type": "SFLOW_5",
    "sampling_rate": 64,
    "sampler_address": "127.0.0.1",
    "bytes": 1518,
    "src_addr": "10.9.0.1",
    "dst_addr": "10.9.0.2",
    "proto": "TCP",
    "src_port": 59258,
    "dst_port": 5201,
}


def test_a_goflow2_line_becomes_a_sample() -> None:
    s = parse_line(json.dumps(LINE).encode())
    assert s is not None
    assert (s.src_ip, s.dst_ip, s.protocol, s.src_port, s.dst_port) == (
        ip_address("10.9.0.1"),
        ip_address("10.9.0.2"),
        6,
        59258,
        5201,
    )
    assert (s.frame_bytes, s.sampling_rate, s.agent) == (1518, 64, ip_address("127.0.0.1"))


def test_protocols_by_name_or_number_and_portless() -> None:
    icmp = parse_line(json.dumps({**LINE, "proto": "ICMP"}))
    assert icmp is not None and icmp.protocol == 1 and icmp.src_port is None and icmp.dst_port is None
    other = parse_line(json.dumps({**LINE, "proto": 103}))
    assert other is not None and other.protocol == 103
    v6 = parse_line(json.dumps({**LINE, "src_addr": "2001:db8::1", "dst_addr": "2001:db8::2", "proto": "UDP"}))
    assert v6 is not None and v6.protocol == 17 and v6.src_ip.version == 6


def test_garbage_is_dropped() -> None:
    for bad in (
        b"not json",
        b"[]",
        json.dumps({**LINE, "type": "NETFLOW_V9"}),
        json.dumps({**LINE, "src_addr": "nonsense"}),
        json.dumps({**LINE, "proto": "XYZ"}),
        json.dumps({k: v for k, v in LINE.items() if k != "bytes"}),
        json.dumps({**LINE, "bytes": "many"}),
        json.dumps({**LINE, "pad": "x" * MAX_LINE}),
    ):
        assert parse_line(bad) is None, bad


def test_metrics_server_never_takes_the_api_port() -> None:
    """goflow2's own HTTP server defaults to :8080 on every address, the API's port."""
    argv = goflow2_argv(Path("/x/goflow2"), ("::1", 6343))
    assert argv[argv.index("-addr") + 1] == "127.0.0.1:0"
    assert argv[argv.index("-listen") + 1] == "sflow://[::1]:6343"
