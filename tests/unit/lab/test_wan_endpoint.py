"""``wan.endpoints``: a server of its own beyond the provider (seed 003's cloud VM), from the
campus file to the proxy's ``--endpoint`` and its shared buckets."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from viplanes.lab.experiments import RunSpec, estimate_s
from viplanes.lab.services import wan_options
from viplanes.lab.wan.endpoint import EndpointShape, parse_endpoint
from viplanes.lab.wan.proxy import Shape, TokenBucket, main, shared_buckets
from viplanes.topologies.loader import TopologyError, parse_topology
from viplanes.topologies.model import Wan, WanEndpoint

VM = WanEndpoint("vm", ("ssh", "http"), down_mbps=7.5, total_mbps=9.5)


def test_a_campus_file_places_services_on_an_endpoint(campus_data: dict[str, Any]) -> None:
    data = copy.deepcopy(campus_data)
    vm = {"name": "vm", "services": ["ssh", "http"], "down_mbps": 7.5, "total_mbps": 9.5}
    data["wan"] = {"per_connection_mbps": 10, "down_mbps": 16, "endpoints": [vm]}
    wan = parse_topology(data, "campus.yaml").wan
    assert wan is not None and wan.endpoints == (VM,)
    assert wan.endpoint("ssh") == VM and wan.endpoint("s3") is None
    assert wan.down_for("http") == 7.5 and wan.down_for("s3") == 16
    assert (
        Wan(10, endpoints=(WanEndpoint("vm", ("ssh",), total_mbps=4),)).down_for("ssh") == 4
    )  # its NIC bounds one too


@pytest.mark.parametrize(
    "endpoints, problem",
    [
        ([{"name": "vm", "services": ["ftp"]}], "wan.endpoints[0].services: 'ftp' is not one of iperf3, s3, ssh, http"),
        ([{"name": "vm", "services": []}], "wan.endpoints[0].services: expected a list of one or more"),
        ([{"name": "vm"}], "wan.endpoints[0]: missing required key 'services'"),
        ([{"name": "vm", "services": ["ssh"], "total_mbps": 0}], "wan.endpoints[0].total_mbps: expected a positive"),
        ([{"name": "vm", "services": ["ssh"], "nic": 3}], "wan.endpoints[0].nic: unknown key"),
        (
            [{"name": "a", "services": ["ssh"]}, {"name": "b", "services": ["http", "ssh"]}],
            "wan.endpoints[1].services: 'ssh' is already in endpoint 'a'",
        ),
        ("vm", "wan.endpoints: expected a list"),
    ],
)
def test_bad_endpoints_are_named(campus_data: dict[str, Any], endpoints: Any, problem: str) -> None:
    data = copy.deepcopy(campus_data)
    data["wan"] = {"per_connection_mbps": 10, "endpoints": endpoints}
    with pytest.raises(TopologyError) as err:
        parse_topology(data, "campus.yaml")
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_the_proxy_gets_the_running_services_ports() -> None:
    wan = Wan(10, endpoints=(VM, WanEndpoint("box", ("iperf3",), up_mbps=2)))
    argv = wan_options(wan, 9000, {"iperf3": 5201, "s3": 9000, "ssh": 22, "http": 80})
    ends = [argv[i + 1] for i, a in enumerate(argv) if a == "--endpoint"]
    assert ends == ["22,80=down:7.5,total:9.5", "5201=up:2"]
    assert parse_endpoint(ends[0]) == EndpointShape((22, 80), None, 7.5, 9.5)
    # seed 003's services not running (no file tools): the endpoint has no port, no option
    assert "--endpoint" not in wan_options(Wan(10, endpoints=(VM,)), 9000, {"iperf3": 5201, "s3": 9000})


@pytest.mark.parametrize(
    "text",
    [
        "22,80",
        "22=",
        "x=down:1",
        "22=speed:1",
        "22=down:0",
        "22=down:nan",
        "22,22=down:1",
        "22=down:1,down:2",
        "0=up:1",
    ],
)
def test_bad_endpoint_options_are_one_line(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError) as err:
        parse_endpoint(text)
    assert "\n" not in str(err.value) and text in str(err.value)
    with pytest.raises(SystemExit) as code:
        main(["--forward", "127.0.0.1:1=127.0.0.1:2", "--mbps", "10", "--endpoint", text])
    assert code.value.code == 2 and "--endpoint" in capsys.readouterr().err


def test_a_port_in_two_endpoints_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--forward", "127.0.0.1:1=127.0.0.1:2", "--mbps", "10", "--endpoint", "1=up:1", "--endpoint", "1=down:1"])
    assert "one endpoint at most" in capsys.readouterr().err


def test_connections_to_an_endpoint_share_its_nic() -> None:
    """Four connections, each capped at 7.5 Mbit/s, move 9.5 together: the shared bucket holds."""
    e = parse_endpoint("22=down:7.5,total:9.5")
    shape = Shape(6e6, 16e6, 64 * 1024).for_endpoint(e)
    assert (shape.up_bps, shape.down_bps) == (6e6, 7.5e6)
    nic = shared_buckets(e, 64 * 1024)
    downs = [shape.directions(None, nic)[1] for _ in range(4)]
    assert all(d.shared is downs[0].shared for d in downs)
    sent, t, piece = 0, 0.0, 16 * 1024
    free_at = [0.0] * 4  # each connection sends its next piece once its wait is over
    while t < 20.0:
        i = min(range(4), key=lambda k: free_at[k])
        t = free_at[i]
        free_at[i] = t + downs[i].charge(piece, t) + 1e-6
        sent += piece
    assert 9.5 * 0.95 <= sent * 8 / t / 1e6 <= 9.5 * 1.05
    assert shared_buckets(EndpointShape((22,), down_mbps=1), 1024) is None  # no total: no shared bucket


def test_without_a_total_each_connection_keeps_its_own_cap() -> None:
    e = EndpointShape((22,), down_mbps=7.5)
    down = Shape(6e6, 16e6, 64 * 1024).for_endpoint(e).directions(None, shared_buckets(e, 65536))[1]
    assert down.shared is None and isinstance(down.bucket, TokenBucket) and down.bucket.rate_bps == 7.5e6


def test_the_lane_estimate_knows_the_endpoint() -> None:
    """A file tool's lane must outlast its run: the VM's caps make seed 003's downloads longer."""
    spec = RunSpec("dtn", "download", "lane", "aria2", 4, 1, dataset="one", series="tools")
    plain, vm = Wan(10, down_mbps=16), Wan(10, down_mbps=16, endpoints=(VM,))
    assert estimate_s(spec, 16, wan=vm) > estimate_s(spec, 16, wan=plain) + 5
