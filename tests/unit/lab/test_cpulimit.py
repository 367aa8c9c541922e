"""The CPU limit's plan (which files, which values) from a mount table, and the wrapper that
makes a process join its group before it runs. No cgroup is touched: files stand in for them."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from viplanes.lab import cpulimit
from viplanes.lab.cpulimit import CpuLimit, CpuLimitError, plan_cpu_limit
from viplanes.lab.nodes import LabHost
from viplanes.lab.topo import LabTopo
from viplanes.topologies.loader import load_topology

# this machine: cgroup v1 controllers, a v2 hierarchy without cpu
HYBRID = """\
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""
COMBINED = "cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,cpu,cpuacct 0 0\n"
V2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n"


def test_v1_writes_period_then_quota() -> None:
    limit = plan_cpu_limit(HYBRID, "vl3fa2/desktop", 0.4)
    root = Path("/sys/fs/cgroup/cpu/viplanes-lab/vl3fa2/desktop")
    assert limit.path == root and limit.procs == root / "cgroup.procs"
    assert limit.writes == ((root / "cpu.cfs_period_us", "100000"), (root / "cpu.cfs_quota_us", "40000"))


def test_v1_combined_cpu_cpuacct_mount() -> None:
    limit = plan_cpu_limit(COMBINED, "vl1/desktop", 1.5)
    assert limit.path == Path("/sys/fs/cgroup/cpu,cpuacct/viplanes-lab/vl1/desktop")
    assert limit.writes[-1][1] == "150000"


def test_v2_passes_the_controller_down_then_sets_cpu_max() -> None:
    limit = plan_cpu_limit(V2, "vl1/desktop", 0.25)
    base = Path("/sys/fs/cgroup")
    assert limit.writes == (
        (base / "cgroup.subtree_control", "+cpu"),
        (base / "viplanes-lab/cgroup.subtree_control", "+cpu"),
        (base / "viplanes-lab/vl1/cgroup.subtree_control", "+cpu"),
        (base / "viplanes-lab/vl1/desktop/cpu.max", "25000 100000"),
    )


def test_no_cpu_controller_is_a_readable_error() -> None:
    with pytest.raises(CpuLimitError, match="no cgroup hierarchy with the cpu controller"):
        plan_cpu_limit("tmpfs /sys/fs/cgroup tmpfs rw 0 0\ncgroup /x cgroup rw,memory 0 0\n", "g", 0.5)


def test_tiny_quota_is_raised_to_the_kernel_minimum() -> None:
    assert plan_cpu_limit(HYBRID, "g", 0.001).writes[-1][1] == "1000"
    with pytest.raises(ValueError):
        plan_cpu_limit(HYBRID, "g", 0)


def test_wrapped_process_joins_before_it_runs(tmp_path: Path) -> None:
    limit = CpuLimit(tmp_path, (), 0.5)
    out = subprocess.run(cpulimit.wrap(limit, ["sh", "-c", "echo $$"]), capture_output=True, text=True, check=True)
    # the pid written to cgroup.procs is the pid the command runs as (exec, no child left behind)
    assert limit.procs.read_text().strip() == out.stdout.strip()


def test_wrapped_process_does_not_run_when_it_cannot_join(tmp_path: Path) -> None:
    limit = CpuLimit(tmp_path / "gone", (), 0.5)  # no such group: the write fails
    marker = tmp_path / "ran"
    proc = subprocess.run(cpulimit.wrap(limit, ["touch", str(marker)]), capture_output=True, text=True)
    assert proc.returncode != 0 and not marker.exists()


def test_apply_names_the_file_it_could_not_write(tmp_path: Path) -> None:
    limit = CpuLimit(tmp_path / "g", ((tmp_path / "missing" / "cpu.max", "1 2"),), 0.5)
    with pytest.raises(CpuLimitError, match=r"missing/cpu.max"):
        cpulimit.apply(limit)


def test_remove_takes_the_run_directory_but_not_the_root(tmp_path: Path) -> None:
    group = tmp_path / "viplanes-lab" / "vl1" / "desktop"
    group.mkdir(parents=True)
    assert cpulimit.remove(group, wait=0)
    assert not (tmp_path / "viplanes-lab" / "vl1").exists() and (tmp_path / "viplanes-lab").is_dir()


def test_run_groups_finds_a_stale_runs_hosts(tmp_path: Path) -> None:
    (tmp_path / "viplanes-lab" / "vl1" / "desktop").mkdir(parents=True)
    (tmp_path / "viplanes-lab" / "vl2" / "desktop").mkdir(parents=True)
    mounts = f"cgroup {tmp_path} cgroup rw,cpu 0 0\n"
    assert cpulimit.run_groups(mounts, "vl1") == [tmp_path / "viplanes-lab" / "vl1" / "desktop"]


def test_lab_topo_gives_only_limited_hosts_a_group(campus_yaml: Path) -> None:
    topo = load_topology(campus_yaml)
    hosts = tuple(dataclasses.replace(h, cpu_cores=0.4) if h.name == "desktop" else h for h in topo.hosts)
    lab = LabTopo(topology=dataclasses.replace(topo, hosts=hosts), prefix="vlab12")
    desktop, server = lab.nodeInfo("desktop"), lab.nodeInfo("server")
    assert desktop["cls"] is LabHost and desktop["cpu_cores"] == 0.4 and desktop["cpu_group"] == "vlab12/desktop"
    assert "cpu_cores" not in server and "cpu_group" not in server


def test_remove_never_walks_up_outside_the_lab_root(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    group = tmp_path / "other" / "g"
    group.mkdir(parents=True)
    assert cpulimit.remove(group, wait=0)
    assert (tmp_path / "other").is_dir() and (tmp_path / "empty").is_dir()
