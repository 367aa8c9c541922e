"""`viplanes lab report`: Table 2, the findings against the papers, and the README's table."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click


@click.command("report")
@click.argument("results", type=click.Path(dir_okay=False, path_type=Path), default=Path("lab-results.jsonl"))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="where table2.md/.csv and PNGs go (default: next to RESULTS)",
)
@click.option(
    "--against-paper",
    is_flag=True,
    help="also hold the lab against the paper: one finding per row, the paper's "
    "number, the lab's x10, a verdict (against_paper.md) and paired figures",
)
@click.option(
    "--readme",
    "readmes",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="with --against-paper: rewrite this Markdown file's findings table(s) between its "
    "paper-findings markers (docs/lab.md); repeatable",
)
def report(results: Path, out_dir: Path | None, against_paper: bool, readmes: tuple[Path, ...]) -> None:
    """Table 2 (mean, std dev, max Mbit/s; default vs lane; ratio) and PNG plots.

    RESULTS defaults to lab-results.jsonl, where `viplanes lab run` writes. Exit codes: 0 done,
    2 a bad option or file, 1 no results, 3 a --readme file without a well-formed findings block."""
    from rich.console import Console

    from viplanes.lab.report import load_results, rich_table, table2, write_report
    from viplanes.lab.v6series import grid_runs

    if not results.is_file():
        raise click.UsageError(f"{results}: no such file")
    if readmes and not against_paper:
        raise click.UsageError("--readme needs --against-paper (it writes the findings table)")
    for readme in readmes:  # before the slow part: a file that cannot take the table fails fast
        _check_readme(readme)
    records, bad = load_results(results)
    if not records:
        raise click.ClickException(f"{results}: no lab results in it")
    out_dir = out_dir or results.with_suffix("").parent / f"{results.stem}-report"
    grid = grid_runs(records)  # the v6 series is read by its own finding only
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_report(grid, out_dir) if grid else {}
    console = Console(width=None if sys.stdout.isatty() else 120)
    if grid:
        console.print(rich_table(table2(grid)))
    failed = sum(1 for r in records if not r.get("ok"))
    console.print(
        f"{len(records)} runs ({failed} failed, not counted)" + (f"; {bad} unreadable lines skipped" if bad else "")
    )
    if against_paper:
        files.update(_against_paper(records, out_dir, console))
        for readme in readmes:
            _rewrite_readme(records, results, readmes, readme)
            files[f"findings table in {readme}"] = readme
    for kind, path in files.items():
        console.print(f"{kind}: {path}")


def _against_paper(records: list[dict[str, Any]], out_dir: Path, console: Any) -> dict[str, Path]:
    """The findings table (printed and as Markdown) and the paired figures."""
    from rich.table import Table

    from viplanes.lab.fidelity import HEADER, REPRODUCED, findings, markdown
    from viplanes.lab.fidelity import seeds as fidelity_seeds
    from viplanes.lab.paper import plots as paperplots
    from viplanes.lab.v6series import grid_runs

    items = findings(grid_runs(records)) + fidelity_seeds.findings(records)
    table = Table(title="The lab against the paper (lab numbers x10)", padding=(0, 1), show_lines=True)
    for name in HEADER:
        table.add_column(name, overflow="fold")
    for f in items:
        color = "green" if f.verdict == REPRODUCED else "red" if f.verdict.startswith("not r") else "yellow"
        table.add_row(f.source, f.claim, f.paper, f.lab, f"[{color}]{f.verdict}", f.reason)
    console.print(table)
    grid = grid_runs(records)
    note = fidelity_seeds.wan_note(grid) if grid else "WAN model: none (the v6 series only)"
    console.print(note)
    path = out_dir / "against_paper.md"
    path.write_text(markdown(items) + f"\n{note}\n")
    return {"against_paper": path, **paperplots.write_all(grid_runs(records), out_dir)}


def _rewrite_readme(records: list[dict[str, Any]], results: Path, readmes: tuple[Path, ...], readme: Path) -> None:
    """The findings block(s) of ``readme`` regenerated (checked by `_check_readme` first)."""
    from viplanes.lab import findings_doc
    from viplanes.lab.fidelity import findings
    from viplanes.lab.fidelity import seeds as fidelity_seeds
    from viplanes.lab.v6series import grid_runs

    cmd = findings_doc.command(results.as_posix(), [r.as_posix() for r in readmes])
    items = findings(grid_runs(records)) + fidelity_seeds.findings(records)
    readme.write_text(findings_doc.rewrite(readme.read_text(), items, cmd))


def _check_readme(readme: Path) -> None:
    """Exit 3 with one line when ``readme`` has no well-formed findings block."""
    from viplanes.lab import findings_doc

    try:
        findings_doc.check(readme.read_text())
    except findings_doc.MarkerError as exc:
        click.echo(f"Error: {readme}: {exc}", err=True)
        sys.exit(3)
