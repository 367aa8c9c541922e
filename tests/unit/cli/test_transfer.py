"""`viplanes transfer`: destination from the command, the lease, exit codes, refusals, advice."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.live import LiveServer
from tests.support.world import World
from viplanes.cli.transfer import transfer
from viplanes.client.http import ApiClient, LaneLease, LaneRefused, lane
from viplanes.client.targets import Destination, NoDestination, derive, rclone_advice
from viplanes.config import ClientConfig

ENV = {"RCLONE_CONFIG_S3REMOTE_ENDPOINT": "http://s3.cloud.example:9000"}


def show(text: str) -> Any:
    return lambda _name: text


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["iperf3", "-c", "203.0.113.10"], Destination("203.0.113.10", 5201, "tcp")),
        (["/usr/bin/iperf3", "-u", "-c", "cloud.example", "-p", "5202"], Destination("cloud.example", 5202, "udp")),
        (["iperf3", "--client=cloud.example", "--port=6000"], Destination("cloud.example", 6000, "tcp")),
        (["scp", "-P", "2222", "-r", "data", "alice@dtn.example.org:/in"], Destination("dtn.example.org", 2222)),
        (["scp", "big.tar", "scp://h.example:2200/x"], Destination("h.example", 2200)),
        (["scp", "./a:b", "host.example:/x"], Destination("host.example", 22)),
        (["rsync", "-av", "-e", "ssh -p 2200", "d/", "u@[2001:db8:ff::10]:/x"], Destination("2001:db8:ff::10", 2200)),
        (["rsync", "-a", "d/", "mirror.example::data"], Destination("mirror.example", 873)),
        (["rsync", "-a", "d/", "rsync://m.example:8873/data"], Destination("m.example", 8873)),
        (["rclone", "copy", "data", "s3remote:bucket/x"], Destination("s3.cloud.example", 9000)),
        (
            ["rclone", "copy", "data", ":s3,provider=Minio,endpoint='https://s3.example':b"],
            Destination("s3.example", 443),
        ),
        (
            ["rclone", "copy", "data", "s3remote,endpoint=\"http://203.0.113.10:9000\":b"],
            Destination("203.0.113.10", 9000),
        ),
        (["rclone", "sync", "--config", "x.conf", "/tmp/a:b", "other:b"], Destination("other.example", 443)),
    ],
)
def test_derive(argv: list[str], expected: Destination) -> None:
    got = derive(argv, ENV, show("[other]\ntype = s3\nendpoint = other.example\n"))
    assert (got.host, got.port, got.protocol) == (expected.host, expected.port, expected.protocol)


@pytest.mark.parametrize(
    "argv",
    [
        ["iperf3", "-s"],
        ["scp", "a", "b"],
        ["rclone", "copy", "a", "gdrive:x"],
        ["rclone", "copy", "a", ":s3:b"],
        ["sh", "-c", "exit 3"],
        ["iperf3", "-c", "h", "-p", "x"],
    ],
)
def test_derive_refuses(argv: list[str]) -> None:
    with pytest.raises(NoDestination):
        derive(argv, {}, show("[gdrive]\ntype = drive\n"))


def test_rclone_advice_only_without_transfers() -> None:
    text = rclone_advice(["rclone", "copy", "a", "s3:b"], cores=2)
    assert text and "parallel transfers matter more than chunk size" in text and "--transfers" in text
    assert rclone_advice(["rclone", "copy", "--transfers", "8", "a", "s3:b"]) is None
    assert rclone_advice(["rclone", "--transfers=8", "copy"]) is None and rclone_advice(["scp", "a", "h:b"]) is None


def run(live: LiveServer, world: World, *args: str) -> Any:
    return CliRunner().invoke(transfer, ["--api-url", live.url, "--token", world.tokens["alice"], *args])


def lanes(world: World) -> list[dict[str, Any]]:
    return world.client.get("/api/v1/lanes", headers=world.h("alice")).get_json()


def test_exit_code_and_release(live: LiveServer, world: World) -> None:
    r = run(
        live,
        world,
        "--src",
        "10.1.0.10",
        "--dst",
        "203.0.113.10",
        "--dst-ports",
        "9000-9010",
        "--",
        "sh",
        "-c",
        "exit 3",
    )
    assert r.exit_code == 3, r.output
    [lane_] = lanes(world)
    assert lane_["state"] == "released" and lane_["dst_ports"] == ["9000-9010"]
    assert "carried 10000 bytes" in r.stderr and "mean" in r.stderr  # MemoryDataplane's counters


def test_destination_from_command(live: LiveServer, world: World, tmp_path: Any) -> None:
    r = run(live, world, "--src", "10.1.0.10", "--", "sh", "-c", "exit 0")
    assert r.exit_code == 0 and "cannot tell where sh sends data" in r.stderr and not lanes(world)
    r = run(live, world, "--src", "10.1.0.10", "--dst", "203.0.113.10", "--", "true", "-c", "x")
    assert r.exit_code == 0 and "give --dst-ports" in r.stderr
    # iperf3 -c HOST -p PORT: the lane follows the command (a fake iperf3 that only exits)
    fake = tmp_path / "iperf3"
    fake.write_text("#!/bin/sh\nexit 7\n")
    fake.chmod(0o755)
    r = run(live, world, "--src", "10.1.0.10", "--", str(fake), "-c", "203.0.113.10", "-p", "9001")
    assert r.exit_code == 7 and "from iperf3 -c" in r.stderr
    assert lanes(world)[0]["dst_port"] == 9001 and lanes(world)[0]["state"] == "released"


def test_refusal_runs_anyway_or_exits(live: LiveServer, world: World) -> None:
    r = run(live, world, "--src", "10.1.0.10", "--dst", "198.18.0.1", "--dst-ports", "9000", "--", "sh", "-c", "exit 5")
    assert r.exit_code == 5 and "normal (firewall) path" in r.stderr and "outside grant" in r.stderr
    r = run(
        live,
        world,
        "--require-lane",
        "--src",
        "10.1.0.10",
        "--dst",
        "198.18.0.1",
        "--dst-ports",
        "9000",
        "--",
        "sh",
        "-c",
        "exit 5",
    )
    assert r.exit_code == 1 and "error: no lane" in r.stderr
    r = CliRunner().invoke(
        transfer,
        [
            "--require-lane",
            "--api-url",
            "http://127.0.0.1:9",
            "--token",
            "t",
            "--src",
            "10.1.0.10",
            "--dst",
            "203.0.113.10",
            "--dst-ports",
            "9000",
            "--",
            "sh",
            "-c",
            "exit 5",
        ],
    )
    assert r.exit_code == 3 and "cannot reach" in r.stderr


def test_lease_renews_and_library_releases(live: LiveServer, world: World) -> None:
    api = ApiClient(ClientConfig(api_url=live.url, token=world.tokens["alice"]))
    body = {"src_ip": "10.1.0.10", "dst_ip": "203.0.113.10", "dst_port": 9002, "protocol": "tcp", "purpose": "t"}
    lease = LaneLease(api, body, lease_s=6, renew_s=1)
    first = lease.start()
    import time

    deadline = time.monotonic() + 10  # renewals every 1 s; a loaded machine may run them late
    now = api.lane(lease.id)  # type: ignore[arg-type]
    while now["duration_s"] < first["duration_s"] + 2 and time.monotonic() < deadline:
        time.sleep(0.25)
        now = api.lane(lease.id)  # type: ignore[arg-type]
    assert now["duration_s"] >= first["duration_s"] + 2  # extended by 1 s per second held
    lease.release()
    assert api.lane(lease.id)["state"] == "released"  # type: ignore[arg-type]
    with lane(api, lease_s=30, **{**body, "dst_port": 9003}) as held:
        assert api.lane(held.id)["state"] == "active"
    assert api.lane(held.id)["state"] == "released"
    with pytest.raises(LaneRefused), lane(api, **{**body, "dst_ip": "198.18.0.1"}):
        pass
    with pytest.raises(RuntimeError), lane(api, **{**body, "dst_port": 9004}) as held:
        raise RuntimeError("the transfer failed")
    assert api.lane(held.id)["state"] == "released"
