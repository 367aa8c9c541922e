"""Seed 003's tools, pure parts: the lab's own sshd config, the clients' argv, the plan rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from viplanes.lab.experiments import Sweep, needed_shapes, plan
from viplanes.lab.filetools import FileServices, server_argvs, sshd_config, tool_argv
from viplanes.lab.measure import rclone_argv
from viplanes.lab.paper.grid import paper_plan, paper_sweep

SVC = FileServices(
    "203.0.113.10",
    22,
    80,
    "root",
    Path("/w/ssh/client_ed25519"),
    Path("/w/ssh/known_hosts"),
    Path("/w/cloud/s3"),
)
FILE = Path("/w/cloud/s3/lab/datasets/16M/one/part-000")


def test_sshd_takes_only_this_runs_key_and_never_a_password() -> None:
    text = sshd_config(Path("/w/ssh"), "127.0.0.1", 22, "root")
    lines = set(text.splitlines())
    assert {
        "ListenAddress 127.0.0.1",
        "AuthorizedKeysFile /w/ssh/authorized_keys",
        "HostKey /w/ssh/host_ed25519",
        "AllowUsers root",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowTcpForwarding no",
    } <= lines
    # the machine's own sshd and /etc/ssh are never read or written
    assert "/etc/ssh" not in text
    sshd, http = server_argvs(Path("/w/ssh/sshd_config"), "rclone", Path("/w/cloud/s3"), "127.0.0.1", 80)
    assert sshd[-2:] == ["-f", "/w/ssh/sshd_config"] and "-D" in sshd
    assert http[:3] == ["rclone", "serve", "http"] and "--read-only" in http


def test_ssh_clients_pin_the_runs_host_key_and_use_its_key_only() -> None:
    for tool in ("scp", "rsync"):
        argv = " ".join(tool_argv(tool, SVC, FILE, Path("/w/dl")))
        assert "-i /w/ssh/client_ed25519" in argv and "IdentitiesOnly=yes" in argv
        assert "StrictHostKeyChecking=yes" in argv and "UserKnownHostsFile=/w/ssh/known_hosts" in argv
        assert "GlobalKnownHostsFile=/dev/null" in argv and "BatchMode=yes" in argv and "-F /dev/null" in argv
        assert argv.endswith(f"root@203.0.113.10:{FILE} /w/dl/part-000")
    assert "-P 22" in " ".join(tool_argv("scp", SVC, FILE, Path("/w/dl")))  # scp's port flag


def test_http_clients_one_and_many_connections() -> None:
    url = "http://203.0.113.10:80/lab/datasets/16M/one/part-000"
    wget = tool_argv("wget", SVC, FILE, Path("/w/dl"))
    assert wget[-1] == url and wget[wget.index("-O") + 1] == "/w/dl/part-000"
    aria = tool_argv("aria2", SVC, FILE, Path("/w/dl"), parallel=4)
    assert aria[0] == "aria2c" and aria[aria.index("-x") + 1] == "4" and aria[aria.index("-s") + 1] == "4"
    assert aria[-1] == url and "--no-conf" in aria
    assert tool_argv("aria2", SVC, FILE, Path("/w/dl"), parallel=64)[2] == "16"  # aria2c's maximum
    with pytest.raises(ValueError, match="unknown file tool 'ftp'"):
        tool_argv("ftp", SVC, FILE, Path("/w/dl"))


def test_a_one_file_rclone_download_goes_in_ranged_gets() -> None:
    argv = rclone_argv("rclone", "cloud:lab/x", "/tmp/x", 4, 4, 1, multi_thread_streams=4)
    assert argv[argv.index("--multi-thread-streams") + 1] == "4"
    assert argv[argv.index("--multi-thread-chunk-size") + 1] == "4M"
    assert argv[argv.index("--s3-chunk-size") + 1] == "5M"  # S3's minimum part, though only GETs follow
    assert "--multi-thread-streams" not in rclone_argv("rclone", "a", "b", 4, 8)


def test_plan_downloads_with_the_file_tools_and_needs_the_one_file_dataset() -> None:
    sweep = Sweep(placements=("dtn",), paths=("default",), tools=("scp", "aria2"), transfers=(4, 8))
    specs = plan(sweep)
    assert {(s.tool, s.parallel, s.direction, s.dataset) for s in specs} == {
        ("scp", 1, "download", "one"),
        ("aria2", 4, "download", "one"),
        ("aria2", 8, "download", "one"),
    }
    assert needed_shapes(sweep) == ("one",)
    Sweep(tools=("scp", "rsync", "wget", "aria2")).check()


def test_paper_grid_has_the_tools_series_from_the_dtn() -> None:
    tools = [s for s in paper_plan() if s.series == "tools"]
    assert {(s.tool, s.parallel) for s in tools} == {
        ("rclone", 10),
        ("scp", 1),
        ("rsync", 1),
        ("wget", 1),
        ("aria2", 4),
    }
    assert next(s for s in tools if s.tool == "rclone").chunk_mb == 1  # 16 GETs, so all ten have work
    assert {(s.placement, s.path, s.direction, s.dataset) for s in tools} == {("dtn", "default", "download", "one")}
    assert {"scp", "rsync", "wget", "aria2"} <= set(paper_sweep().tools)
