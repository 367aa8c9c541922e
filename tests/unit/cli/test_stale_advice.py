"""Advice the CLI prints must be advice one can follow (issue 29, stale lines)."""

from __future__ import annotations

import click
import pytest

from viplanes.cli.transfer import transfer
from viplanes.client.targets import NoDestination, derive, rclone_advice


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_rclone_advice_never_asks_for_the_default_it_already_runs(cores):
    text = rclone_advice(["rclone", "copy", "a", "s3:b"], cores=cores)
    assert text and "Consider --transfers" not in text and "--s3-chunk-size 16M" in text


def test_rclone_advice_on_a_big_machine_names_its_cores():
    text = rclone_advice(["rclone", "copy", "a", "s3:b"], cores=16)
    assert text and "Consider --transfers 16" in text


def test_no_destination_names_only_options_transfer_has():
    with pytest.raises(NoDestination) as info:
        derive(["globus-url-copy", "a", "b"])
    named = {w.strip(",;()") for w in str(info.value).split() if w.startswith("--")}
    options = {opt for p in transfer.params if isinstance(p, click.Option) for opt in p.opts}
    assert named and named <= options, named - options
