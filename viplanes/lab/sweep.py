"""What a lab sweep runs: placements x directions x paths x tools x parameters, as `RunSpec`s.

Pure: `plan()` turns a `Sweep` into the ordered list of runs, grouped so one lane serves each
placement's lane runs; `Sweep.check` refuses anything outside the known grid with one line.
"""

from __future__ import annotations

from dataclasses import dataclass

from .datasets import SHAPES
from .estimate import NO_LANE
from .filetools import FILE_TOOLS, MULTI_TOOLS

PLACEMENTS = ("desktop", "server", "dtn")
DIRECTIONS = ("upload", "download")
PATHS = ("default", "lane")
TOOLS = ("iperf3", "rclone")
ALL_TOOLS = TOOLS + FILE_TOOLS  # seed 003's tools download one file ("one" dataset) only


@dataclass(frozen=True)
class Sweep:
    """Which runs to make. The defaults are a sensible subset; the paper's grid is much larger."""

    placements: tuple[str, ...] = PLACEMENTS
    directions: tuple[str, ...] = DIRECTIONS
    paths: tuple[str, ...] = PATHS
    tools: tuple[str, ...] = TOOLS
    streams: tuple[int, ...] = (1, 4)  # iperf3 -P
    transfers: tuple[int, ...] = (4, 16)  # rclone --transfers
    chunks_mb: tuple[int, ...] = (8,)  # rclone --s3-chunk-size (S3's minimum part is 5 MiB)
    datasets: tuple[str, ...] = ("split10",)
    size_mb: int = 32
    seconds: float = 5.0  # iperf3 -t
    reps: int = 1
    upload_concurrency: int | None = None  # rclone --s3-upload-concurrency (None: rclone's 4)
    dataset_mb: tuple[tuple[str, int], ...] = ()  # per-dataset sizes overriding size_mb

    def size_of(self, dataset: str | None) -> int:
        """The size in MiB of one dataset of this sweep."""
        return dict(self.dataset_mb).get(dataset or "", self.size_mb)

    def check(self) -> None:
        """ValueError with one readable line for anything outside the known grid."""
        for name, values, known in (
            ("placement", self.placements, PLACEMENTS),
            ("direction", self.directions, DIRECTIONS),
            ("path", self.paths, PATHS),
            ("tool", self.tools, ALL_TOOLS),
            ("dataset", self.datasets, tuple(SHAPES)),
        ):
            bad = [v for v in values if v not in known]
            if bad or not values:
                raise ValueError(f"{name}: {', '.join(bad) or 'none given'} (choose from {', '.join(known)})")
        for name, nums in (("streams", self.streams), ("transfers", self.transfers), ("chunk size", self.chunks_mb)):
            if not nums or any(n < 1 or n > 128 for n in nums):
                raise ValueError(f"{name} must be between 1 and 128")
        if any(c < 5 for c in self.chunks_mb) and "upload" in self.directions:
            # a download's chunk is only its GET size (seed 003's S3 run uses 1 MiB)
            raise ValueError("chunk size must be at least 5 MiB when uploading (the S3 minimum part size)")
        sizes = [self.size_mb, *(mb for _, mb in self.dataset_mb)]
        if not all(1 <= mb <= 4096 for mb in sizes) or not 1 <= self.reps <= 100:
            raise ValueError("size must be 1-4096 MiB and repetitions 1-100")
        if not 1 <= self.seconds <= 600:
            raise ValueError("iperf3 duration must be 1-600 s")


@dataclass(frozen=True)
class RunSpec:
    placement: str
    direction: str
    path: str
    tool: str
    parallel: int  # iperf3 streams or rclone transfers
    rep: int
    chunk_mb: int | None = None
    dataset: str | None = None
    seconds: float | None = None
    upload_concurrency: int | None = None
    series: str | None = None  # which sweep of `lab run --paper` made it (streams, transfers...)


def plan(sweep: Sweep) -> list[RunSpec]:
    """Every run of the sweep, grouped by placement then path (one lane per group)."""
    runs = []
    for placement in sweep.placements:
        for path in sweep.paths:
            if path == "lane" and placement in NO_LANE:
                continue
            for rep in range(1, sweep.reps + 1):
                for direction in sweep.directions:
                    if "iperf3" in sweep.tools:
                        runs += [
                            RunSpec(placement, direction, path, "iperf3", p, rep, seconds=sweep.seconds)
                            for p in sweep.streams
                        ]
                    if "rclone" in sweep.tools:
                        runs += [
                            RunSpec(
                                placement,
                                direction,
                                path,
                                "rclone",
                                t,
                                rep,
                                chunk_mb=c,
                                dataset=d,
                                upload_concurrency=sweep.upload_concurrency,
                            )
                            for d in sweep.datasets
                            for t in sweep.transfers
                            for c in sweep.chunks_mb
                        ]
                    if direction == "download":  # seed 003 fetches a file from the cloud
                        runs += [
                            RunSpec(placement, direction, path, tool, t, rep, dataset="one")
                            for tool in FILE_TOOLS
                            if tool in sweep.tools
                            for t in (sweep.transfers if tool in MULTI_TOOLS else (1,))
                        ]
    return runs


def needed_shapes(sweep: Sweep) -> tuple[str, ...]:
    """The datasets a sweep's runs read: rclone's, plus the one file seed 003's tools fetch."""
    shapes = sweep.datasets if "rclone" in sweep.tools else ()
    if any(t in FILE_TOOLS for t in sweep.tools) and "one" not in shapes:
        shapes += ("one",)
    return shapes
