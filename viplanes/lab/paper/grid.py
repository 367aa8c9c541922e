"""`viplanes lab run --paper`: the paper's section 4 grid, scaled to finish in about 15 minutes.

The paper crossed every parameter (3 placements x 2 directions x 4 transfer counts x 4 chunk
sizes x 9 datasets x 4 repetitions). Its findings are read one factor at a time (Figures 4 and
5 plot one parameter each), so the scaled grid sweeps one factor at a time around a fixed point:

- ``streams``: iperf3 -P 1..32 from every placement, both directions (seed 004's curve);
- ``transfers``: rclone --transfers 4, 8, 16, 32 on the split dataset, both directions (Fig. 5);
- ``chunks``: rclone --s3-chunk-size 5, 8, 16, 32 MiB uploading the one-file dataset from the
  DTN, where the paper measured it (Fig. 4; S3 refuses parts under 5 MiB, so the paper's 4 MB
  becomes 5 MiB);
- ``baseline``: the desktop (iperf3 and rclone) and the server (iperf3) on the campus default
  path, behind the firewall (Table 2's "5-7x");
- ``tools``: seed 003's download of one file from the DTN: S3 multipart (rclone, ranged GETs on
  10 connections, `aws s3 cp`'s default), rsync and scp over ssh, wget, aria2c on 4 connections
  (axel's default); each tool's start-up is timed on a 1-byte file and taken out (`startup.py`);
- ``objects``: seed 002's concurrent downloads of large objects, from the DTN: 10 objects of
  9.6 MiB by 4 and 10 rclone transfers.

A file's parts go one after another (``--s3-upload-concurrency 1``), as Google Drive, the
paper's cloud, takes them: so a chunk size changes request sizes, not the number of connections.
`paper_plan` is pure; `--full` crosses everything instead (hours).
"""

from __future__ import annotations

from ..estimate import NO_LANE
from ..filetools import FILE_TOOLS
from ..sweep import DIRECTIONS, PLACEMENTS, TOOLS, RunSpec, Sweep

STREAMS = (1, 4, 8, 16, 32)  # 2 left out to fit 15 minutes; seed 004 is read at 1, 4, 8 and the ceiling
TRANSFERS = (4, 8, 16, 32)
CHUNKS_MB = (5, 8, 16, 32)
FIXED_CHUNK_MB = 8  # the chunk size while transfers vary
FIXED_TRANSFERS = 4  # the transfers while chunk sizes vary (one file: one transfer anyway)
SPLIT = "split50"  # the paper split each file into 10 and 50; 50 files keep 32 transfers busy
ONE = "one"
UPLOAD_CONCURRENCY = 1
SIZE_MB = 48  # the split dataset: 50 files of ~1 MiB, enough to keep 32 transfers busy
ONE_MB = 16  # the one-file dataset: one connection at the cap, so kept small (13 s a run)
SECONDS = 3.0
# the paper's chunk numbers are the DTN's; one file at one connection is the grid's slowest run
# (a 16 MiB file at 6 Mbit/s up: ~25 s), so the chunk sweep runs there only (all with --full)
CHUNK_PLACEMENTS = ("dtn",)
BASELINE_PARALLEL = 16
# seed 003: one file fetched from the cloud by each tool, from the DTN (its path is the WAN's alone)
TOOL_PLACEMENTS = ("dtn",)
# the seed ran every tool out of the box: axel's default is 4 connections, `aws s3 cp`'s 10
# concurrent requests (of 8 MB parts: 128 for its 1 GiB file); the lab's 16 MiB file goes in 1 MiB
# GETs so all ten have work
TOOL_CONNECTIONS = 4
S3_CONNECTIONS = 10
TOOL_CHUNK_MB = 1
# seed 002: concurrent downloads of large objects, from the DTN. Its objects were large, so a
# GET's round trip and read time were small against its transfer; 1 MiB files make them ~45% of
# it, 9.6 MiB ones ~7% (96 MiB in 10 files; 10 processes, one object each)
OBJECTS = "split10"
OBJECTS_MB = 96
OBJECT_PROCESSES = (4, 10)
OBJECT_PLACEMENTS = ("dtn",)


def paper_sweep(full: bool = False) -> Sweep:
    """The sweep whose datasets, size and options `--paper` uses (the whole cross with full)."""
    if full:
        return Sweep(
            streams=STREAMS,
            transfers=TRANSFERS,
            chunks_mb=CHUNKS_MB,
            datasets=("one", "split10", "split50"),
            size_mb=SIZE_MB,
            seconds=SECONDS,
            reps=4,
            upload_concurrency=UPLOAD_CONCURRENCY,
            tools=TOOLS + FILE_TOOLS,
        )
    return Sweep(
        streams=STREAMS,
        transfers=TRANSFERS,
        chunks_mb=CHUNKS_MB,
        datasets=(ONE, SPLIT, OBJECTS),
        size_mb=SIZE_MB,
        seconds=SECONDS,
        upload_concurrency=UPLOAD_CONCURRENCY,
        dataset_mb=((ONE, ONE_MB), (OBJECTS, OBJECTS_MB)),
        tools=TOOLS + FILE_TOOLS,
    )


def paper_plan(placements: tuple[str, ...] = PLACEMENTS, reps: int = 1) -> list[RunSpec]:
    """Every run of the scaled grid, grouped by placement then path (one lane per group)."""
    runs: list[RunSpec] = []
    for placement in placements:
        lane_path = "default" if placement in NO_LANE else "lane"
        paths = (lane_path,) if placement in NO_LANE else ("default", "lane")
        for path in paths:
            for rep in range(1, reps + 1):
                if path != lane_path:  # the campus default path: the lane gain's baseline
                    runs += _baseline(placement, rep)
                    continue
                runs += _one_factor(placement, path, rep)
    return runs


def _baseline(placement: str, rep: int) -> list[RunSpec]:
    out = []
    for direction in DIRECTIONS:
        out.append(RunSpec(placement, direction, "default", "iperf3", 4, rep, seconds=SECONDS, series="baseline"))
        if placement != "desktop":  # the paper's 5-7x is the desktop's; rclone at 15 is slow
            continue
        out.append(
            RunSpec(
                placement,
                direction,
                "default",
                "rclone",
                BASELINE_PARALLEL,
                rep,
                chunk_mb=FIXED_CHUNK_MB,
                dataset=SPLIT,
                upload_concurrency=UPLOAD_CONCURRENCY,
                series="baseline",
            )
        )
    return out


def _one_factor(placement: str, path: str, rep: int) -> list[RunSpec]:
    out = []
    for direction in DIRECTIONS:
        out += [
            RunSpec(placement, direction, path, "iperf3", p, rep, seconds=SECONDS, series="streams") for p in STREAMS
        ]
        out += [
            RunSpec(
                placement,
                direction,
                path,
                "rclone",
                t,
                rep,
                chunk_mb=FIXED_CHUNK_MB,
                dataset=SPLIT,
                upload_concurrency=UPLOAD_CONCURRENCY,
                series="transfers",
            )
            for t in TRANSFERS
        ]
    if placement in TOOL_PLACEMENTS:
        out += tool_runs(placement, path, rep)
    if placement in OBJECT_PLACEMENTS:
        out += [
            RunSpec(
                placement,
                "download",
                path,
                "rclone",
                p,
                rep,
                chunk_mb=FIXED_CHUNK_MB,
                dataset=OBJECTS,
                upload_concurrency=UPLOAD_CONCURRENCY,
                series="objects",
            )
            for p in OBJECT_PROCESSES
        ]
    if placement not in CHUNK_PLACEMENTS:
        return out
    out += [
        RunSpec(
            placement,
            "upload",
            path,
            "rclone",
            FIXED_TRANSFERS,
            rep,
            chunk_mb=c,
            dataset=ONE,
            upload_concurrency=UPLOAD_CONCURRENCY,
            series="chunks",
        )
        for c in CHUNKS_MB
    ]
    return out


def tool_runs(placement: str, path: str, rep: int) -> list[RunSpec]:
    """Seed 003: the one-file dataset downloaded by S3 multipart, rsync, scp, wget and aria2c."""
    s3 = RunSpec(
        placement,
        "download",
        path,
        "rclone",
        S3_CONNECTIONS,
        rep,
        chunk_mb=TOOL_CHUNK_MB,
        upload_concurrency=UPLOAD_CONCURRENCY,
        dataset=ONE,
        series="tools",
    )
    others = [
        RunSpec(
            placement, "download", path, t, TOOL_CONNECTIONS if t == "aria2" else 1, rep, dataset=ONE, series="tools"
        )
        for t in FILE_TOOLS
    ]
    return [s3, *others]
