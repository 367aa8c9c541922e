"""Is Open vSwitch up? Mininet's own ovs-vsctl calls have no timeout and hang forever against a
dead ovsdb-server, so every test that needs OVS asks this first (`make test` starts it via
scripts/ovs-up)."""

from __future__ import annotations

import subprocess


def ovs_problem() -> str | None:
    """None when ovsdb-server and ovs-vswitchd answer, else a one-line reason."""
    try:
        subprocess.run(["ovs-vsctl", "--timeout=5", "show"], check=True, capture_output=True, text=True, timeout=10)
        subprocess.run(
            ["ovs-appctl", "--timeout=5", "-t", "ovs-vswitchd", "version"],
            check=True,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except FileNotFoundError:
        return "Open vSwitch is not installed (run `make setup`)"
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        detail = getattr(exc, "stderr", "") or ""
        return f"Open vSwitch is not running (run scripts/ovs-up): {detail.strip()[:200]}"
    return None


def vsctl(*args: str) -> str:
    """ovs-vsctl with a timeout (a dead ovsdb-server must fail the test, not hang it)."""
    return subprocess.run(
        ["ovs-vsctl", "--timeout=20", *args], check=True, capture_output=True, text=True, timeout=30
    ).stdout


def lane_flows(bridge: str, lane_id: int) -> list[str]:
    out = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", bridge], check=True, capture_output=True, text=True, timeout=20
    ).stdout
    from viplanes.controller.compile.cookies import lane_cookie

    return [line for line in out.splitlines() if line.split()[0] == f"cookie={lane_cookie(lane_id):#x},"]


def add_bridge(name: str, dpid: int, *controllers: str, extra: tuple[str, ...] = ()) -> None:
    """A userspace (netdev) bridge with ``dpid``, fail-secure, OpenFlow 1.3 only, pointed at
    ``controllers``; ``extra``: more ovs-vsctl commands in the same transaction."""
    args = ["--may-exist", "add-br", name, "--", "set", "bridge", name, "datapath_type=netdev"]
    args += [f"other-config:datapath-id={dpid:016x}", "fail_mode=secure", "protocols=OpenFlow13"]
    if controllers:
        args += ["--", "set-controller", name, *controllers]
    vsctl(*args, *extra)
