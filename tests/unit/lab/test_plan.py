"""The experiment plan: which runs a sweep makes, in which order, and what it refuses."""

from __future__ import annotations

import pytest

from viplanes.lab.experiments import NO_LANE, Sweep, estimate_s, plan


def test_default_sweep_covers_every_placement_direction_and_tool():
    specs = plan(Sweep())
    assert {s.placement for s in specs} == {"desktop", "server", "dtn"}
    assert {s.direction for s in specs} == {"upload", "download"}
    assert {s.tool for s in specs} == {"iperf3", "rclone"}
    assert all(s.path == "default" for s in specs if s.placement in NO_LANE)
    assert {s.path for s in specs if s.placement == "desktop"} == {"default", "lane"}


def test_size_of_grid():
    sweep = Sweep(
        placements=("desktop",),
        directions=("upload",),
        streams=(1, 4, 8, 16),
        transfers=(4, 8, 16, 32),
        chunks_mb=(5, 8, 16, 32),
        datasets=("one", "split10", "split50"),
        reps=2,
    )
    specs = plan(sweep)
    per_path_rep = 4 + 4 * 4 * 3
    assert len(specs) == 2 * 2 * per_path_rep
    rclone = [s for s in specs if s.tool == "rclone"]
    assert all(s.chunk_mb and s.dataset and s.seconds is None for s in rclone)
    assert all(s.chunk_mb is None and s.seconds == 5.0 for s in specs if s.tool == "iperf3")


def test_runs_are_grouped_by_placement_then_path():
    specs = plan(Sweep(placements=("desktop", "server"), reps=2))
    groups = [(s.placement, s.path) for s in specs]
    changes = [g for i, g in enumerate(groups) if i == 0 or groups[i - 1] != g]
    assert changes == [
        ("desktop", "default"),
        ("desktop", "lane"),
        ("server", "default"),
        ("server", "lane"),
    ]  # one lane request per placement


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(placements=("laptop",)), "placement"),
        (dict(paths=()), "path"),
        (dict(tools=("ftp",)), "tool"),
        (dict(datasets=("split3",)), "dataset"),
        (dict(chunks_mb=(4,)), "5 MiB"),
        (dict(transfers=(0,)), "transfers"),
        (dict(size_mb=0), "size"),
        (dict(seconds=0.5), "duration"),
    ],
)
def test_sweep_check_refuses(bad, match):
    with pytest.raises(ValueError, match=match):
        Sweep(**bad).check()


def test_downloads_alone_may_use_chunks_under_the_s3_part_minimum():
    """A download's chunk is its GET size; only an upload's part must be 5 MiB or more."""
    Sweep(directions=("download",), chunks_mb=(1,)).check()
    with pytest.raises(ValueError, match="when uploading"):
        Sweep(directions=("download", "upload"), chunks_mb=(1,)).check()


def test_estimate_is_longer_on_the_firewall_path():
    specs = plan(Sweep(placements=("desktop",), directions=("upload",), tools=("rclone",), transfers=(4,)))
    default, lane = specs
    assert estimate_s(default, 32) > 3 * estimate_s(lane, 32)
