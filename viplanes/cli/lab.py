"""`viplanes lab ...`: run the campus experiments, report them, clean up stale lab runs."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from viplanes.cli.labreport import report
from viplanes.cli.labshell import DEFAULT_TOPOLOGY, REPO, clean, need_root, shell
from viplanes.domain.values import is_decimal
from viplanes.settings.environ import one_setting

if TYPE_CHECKING:
    from viplanes.topologies.model import Wan

PAPER_TOPOLOGY = REPO / "topologies" / "campus-paper.yaml"  # --paper: the round-trip WAN model


def _words(value: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in value.split(",") if w.strip())


def _ints(value: str, option: str) -> tuple[int, ...]:
    try:
        return tuple(int(w.rstrip("Mm")) for w in _words(value))
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}", param_hint=option) from None


@click.group()
def lab() -> None:
    """The Mininet campus lab: placements x directions x paths x tools, and its report."""


@lab.command("run")
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="topology YAML [default: topologies/campus.yaml; with --paper, topologies/campus-paper.yaml]",
)
@click.option(
    "--results",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("lab-results.jsonl"),
    show_default=True,
    help="JSON lines file; every run appends one line",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/tmp/viplanes-lab"),
    show_default=True,
    help="datasets, the S3 directory, service logs",
)
@click.option("--placements", default="desktop,server,dtn", show_default=True)
@click.option("--directions", default="upload,download", show_default=True)
@click.option("--paths", default="default,lane", show_default=True)
@click.option(
    "--tools",
    default="iperf3,rclone",
    show_default=True,
    help="iperf3, rclone; seed 003's downloads: scp, rsync, wget, aria2 (one file; aria2 takes --transfers)",
)
@click.option("--streams", default="1,4", show_default=True, help="iperf3 -P values (paper: 1,4,8,16)")
@click.option("--transfers", default="4,16", show_default=True, help="rclone --transfers values (paper: 4,8,16,32)")
@click.option(
    "--chunks", default="8", show_default=True, help="rclone --s3-chunk-size MiB (paper: 4,8,16,32; S3's minimum is 5)"
)
@click.option("--datasets", default="split10", show_default=True, help="one,split10,split50")
@click.option("--size-mb", type=int, default=32, show_default=True, help="dataset size (MiB)")
@click.option("--seconds", type=float, default=5.0, show_default=True, help="iperf3 -t")
@click.option("--reps", type=int, default=1, show_default=True, help="repetitions")
@click.option(
    "--paper",
    is_flag=True,
    help="the paper's section 4 grid, one factor at a time, in about 15 min "
    "(docs/lab.md); with --full, the whole cross (hours)",
)
@click.option("--full", is_flag=True, help="the paper's whole grid (hours): all values above")
@click.option(
    "--v6-only",
    is_flag=True,
    help="only the v6 series (--paper runs it last): the desktop's upload on v4/v6 default path and "
    "lane, on topologies/campus-dualstack.yaml (docs/lab.md)",
)
@click.option("--dry-run", is_flag=True, help="print the plan and exit")
@click.option(
    "--api",
    "api_url",
    default=None,
    metavar="URL",
    help="use a running `viplanes serve` (with --token and --openflow) instead of starting one",
)
@click.option("--token", default=None, help="researcher token for --api (or $VIPLANES_TOKEN)")
@click.option(
    "--openflow", default=None, metavar="HOST:PORT", help="that server's OpenFlow address, for the lab's switches"
)
def run(
    topology_path: Path | None,
    results: Path,
    work_dir: Path,
    placements: str,
    directions: str,
    paths: str,
    tools: str,
    streams: str,
    transfers: str,
    chunks: str,
    datasets: str,
    size_mb: int,
    seconds: float,
    reps: int,
    paper: bool,
    full: bool,
    v6_only: bool,
    dry_run: bool,
    api_url: str | None,
    token: str | None,
    openflow: str | None,
) -> None:
    """Build the lab, run the experiments, append results. Needs root and OVS (scripts/ovs-up)."""
    from viplanes.lab.experiments import Sweep, estimate_s, plan
    from viplanes.lab.paper.grid import paper_plan, paper_sweep
    from viplanes.lab.v6series import V6_PLACEMENT, v6_estimate_s, v6_plan

    if topology_path is None:
        topology_path = PAPER_TOPOLOGY if paper else DEFAULT_TOPOLOGY

    if paper:  # the paper's grid; only the placements (and --reps without --full) are ours
        sweep = replace(paper_sweep(full), placements=_words(placements))
    else:
        if full:
            streams, transfers, chunks, datasets = "1,4,8,16", "4,8,16,32", "5,8,16,32", "one,split10,split50"
            reps = max(reps, 4)
        sweep = Sweep(
            _words(placements),
            _words(directions),
            _words(paths),
            _words(tools),
            _ints(streams, "--streams"),
            _ints(transfers, "--transfers"),
            _ints(chunks, "--chunks"),
            _words(datasets),
            size_mb,
            seconds,
            reps,
        )
    try:
        sweep.check()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    specs = [] if v6_only else paper_plan(sweep.placements, reps) if paper and not full else plan(sweep)
    # the v6 series: last in --paper (the desktop's; not against an external server's topology)
    v6 = v6_only or (paper and V6_PLACEMENT in sweep.placements and not (api_url or openflow))
    v6_runs = v6_plan() if v6 else []
    wan = _wan(topology_path)
    total_s = sum(estimate_s(s, sweep.size_of(s.dataset), wan=wan) for s in specs)
    total_s += v6_estimate_s() if v6 else 0.0
    click.echo(f"lab: {len(specs) + len(v6_runs)} runs, about {total_s / 60:.0f} min of transfers", err=True)
    if dry_run:
        lines = [(s, "") for s in specs] + [(r.spec(), f" family={r.family}") for r in v6_runs]
        for s, family in lines:
            click.echo(
                f"{s.placement:8} {s.direction:8} {s.path:7} {s.tool:6} P={s.parallel:<3} "
                f"chunk={s.chunk_mb} dataset={s.dataset} rep={s.rep}"
                + (f" series={s.series}" if s.series else "")
                + family
            )
        return
    if v6_only and (api_url or openflow):
        raise click.UsageError("--v6-only builds its own dual-stack lab and service; drop --api/--openflow")
    if not topology_path.is_file():
        raise click.UsageError(f"--topology {topology_path}: no such file")
    external = _external(api_url, token or one_setting("VIPLANES_TOKEN"), openflow)
    need_root()
    if results.is_file() and results.stat().st_size:
        click.echo(
            f"lab: appending to {results}, which already holds runs; its report counts "
            "them all (use --results NEW.jsonl to keep this run apart)",
            err=True,
        )
    records = _execute(sweep, specs, topology_path, results, work_dir, external) if specs else []
    if v6:
        records += _execute_v6(work_dir, results)
    failed = sum(1 for r in records if not r["ok"])
    click.echo(
        f"lab: {len(records)} runs appended to {results} ({failed} failed); report: viplanes lab report {results}",
        err=True,
    )


def _wan(topology_path: Path) -> Wan | None:
    """The topology's WAN model, for the time estimate (None if off or unreadable)."""
    from viplanes.topologies.loader import TopologyError, load_topology

    try:
        wan = load_topology(topology_path).wan
    except (TopologyError, OSError):
        return None
    return wan


def _external(api_url: str | None, token: str | None, openflow: str | None) -> Any:
    """A `Stack` for a server someone already runs, or None to start our own."""
    if not api_url and not openflow:
        return None
    if not (api_url and token and openflow):
        raise click.UsageError("--api needs --token (or $VIPLANES_TOKEN) and --openflow")
    host, _, port = openflow.rpartition(":")
    if not is_decimal(port) or not 0 < int(port) < 65536:
        raise click.BadParameter(f"expected HOST:PORT, got {openflow!r}", param_hint="--openflow")
    from viplanes.lab.stack import Stack

    return Stack(api_url.rstrip("/"), (host or "127.0.0.1", int(port)), token)


def _execute(
    sweep: Any, specs: list, topology_path: Path, results: Path, work_dir: Path, external: Any = None
) -> list[dict[str, Any]]:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from viplanes.lab.experiments import Runner, estimate_s, needed_shapes, session
    from viplanes.lab.filetools import FILE_TOOLS
    from viplanes.lab.stack import StackError

    console = Console(stderr=True)
    need_lanes = "lane" in sweep.paths
    shapes = needed_shapes(sweep)
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.fields[n]}"),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("building the lab", total=len(specs), n=len(specs))
            with session(
                topology_path,
                work_dir,
                shapes,
                sweep.size_mb,
                need_lanes=need_lanes,
                warn=lambda m: console.print(f"[yellow]{m}"),
                external=external,
                dataset_mb=dict(sweep.dataset_mb),
                file_tools=any(t in FILE_TOOLS for t in sweep.tools),
            ) as sess:

                def done(spec: Any, rec: dict[str, Any]) -> None:
                    mark = f"{rec['mbps']:.1f} Mbit/s" if rec["ok"] else f"FAILED {rec['error']}"
                    progress.console.print(
                        f"{spec.placement:8} {spec.direction:8} {spec.path:7} {spec.tool:6} P={spec.parallel:<3} {mark}"
                    )
                    progress.advance(task)

                runner = Runner(sess, results, on_result=done)
                progress.update(task, description="running")
                t0 = time.monotonic()
                records = runner.run_all(
                    specs,
                    lane_duration_s=int(
                        min(
                            3600,
                            120
                            + 2 * sum(estimate_s(s, sweep.size_of(s.dataset), wan=sess.topology.wan) for s in specs),
                        )
                    ),
                )
                progress.update(task, description=f"done in {time.monotonic() - t0:.0f}s")
                return records
    except (StackError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from None


def _execute_v6(work_dir: Path, results: Path) -> list[dict[str, Any]]:
    """The v6 series on its own dual-stack lab (`viplanes/lab/v6lab.py`)."""
    from viplanes.lab.stack import StackError
    from viplanes.lab.v6lab import run_v6_series

    def done(run: Any, rec: dict[str, Any]) -> None:
        mark = f"{rec['mbps']:.1f} Mbit/s" if rec["ok"] else f"FAILED {rec['error']}"
        click.echo(f"v6 series: IPv{run.family} {run.path:7} {mark}", err=True)

    click.echo("lab: the v6 series on topologies/campus-dualstack.yaml", err=True)
    results.parent.mkdir(parents=True, exist_ok=True)
    try:
        return run_v6_series(work_dir, results, on_result=done)
    except (StackError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc).splitlines()[0]) from None


lab.add_command(report)
lab.add_command(shell)
lab.add_command(clean)
