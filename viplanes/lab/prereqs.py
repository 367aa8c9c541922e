"""What the lab needs on this machine, checked before anything is built.

Why first: building the campus takes ~40 s (bridges, namespaces, the controller); finding rclone
or Open vSwitch missing after that wastes it and buries the one line that matters.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from .services import rclone_binary

# program -> what brings it (Debian packages; make setup installs them all)
TOOLS: dict[str, str] = {
    "ovs-vsctl": "openvswitch-switch",
    "ip": "iproute2",
    "tc": "iproute2",
    "iptables": "iptables",
    "ethtool": "ethtool",
    "iperf3": "iperf3",
}
OVS_TIMEOUT_S = 3


def missing(which: Callable[[str], str | None] = shutil.which, rclone: Callable[[], str] = rclone_binary) -> list[str]:
    """One readable line per missing prerequisite; [] when the lab can be built."""
    lines = [
        f"{tool} not found on PATH (Debian package {pkg}; make setup installs it)"
        for tool, pkg in TOOLS.items()
        if which(tool) is None
    ]
    try:
        rclone()
    except RuntimeError as exc:
        lines.append(str(exc))
    if which("ovs-vsctl") is not None and not ovs_running():
        lines.append("Open vSwitch is not running (ovs-vsctl show failed): start it with scripts/ovs-up")
    return lines


def ovs_running() -> bool:
    """ovsdb-server answers (Mininet's own ovs-vsctl calls hang forever when it does not)."""
    try:
        done = subprocess.run(
            ["ovs-vsctl", f"--timeout={OVS_TIMEOUT_S}", "show"], capture_output=True, timeout=OVS_TIMEOUT_S + 1
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
