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
