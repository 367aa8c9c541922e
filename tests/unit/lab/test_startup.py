"""A seed-003 tool's start-up taken out of its rate (viplanes/lab/startup.py)."""

from __future__ import annotations

import pytest

from viplanes.lab.startup import MOST_REMOVED, net_mbps

MIB16 = 16 * 2**20


def test_the_start_up_comes_off_the_wall_time() -> None:
    # scp of 16 MiB through the paper WAN: 14 s wall, 5.5 s of it ssh's handshake
    assert net_mbps(MIB16, 14.0, 5.5) == pytest.approx(MIB16 * 8 / 8.5 / 1e6)
    assert net_mbps(MIB16, 14.0, 0.0) == pytest.approx(MIB16 * 8 / 14.0 / 1e6)


def test_a_noisy_probe_never_takes_out_more_than_its_share() -> None:
    """A probe slower than the run (a loaded machine) must not turn into an absurd rate."""
    floor = MIB16 * 8 / (14.0 * (1 - MOST_REMOVED)) / 1e6
    assert net_mbps(MIB16, 14.0, 13.9) == pytest.approx(floor)
    assert net_mbps(MIB16, 14.0, 60.0) == pytest.approx(floor)
    assert net_mbps(MIB16, 14.0, -3.0) == pytest.approx(MIB16 * 8 / 14.0 / 1e6)  # a clock step: nothing added
    assert net_mbps(MIB16, 0.0, 1.0) == 0.0
