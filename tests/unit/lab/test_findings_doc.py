"""docs/lab.md's findings table and the README's summary of it are the report's, regenerated from
the recorded run.

`docs/results/paper.jsonl` is the latest full `viplanes lab run --paper`; the command each block
names rewrites it from that file. A table edited by hand, or left behind when the run is
replaced, differs from what the command writes, and these tests fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from viplanes.cli.lab import lab
from viplanes.lab import findings_doc
from viplanes.lab.fidelity import Finding, findings
from viplanes.lab.fidelity import seeds as fidelity_seeds
from viplanes.lab.report import load_results
from viplanes.lab.v6series import grid_runs

REPO = Path(__file__).resolve().parents[3]
RESULTS = "docs/results/paper.jsonl"
DOCS = ("README.md", "docs/lab.md")  # the order scripts/paper-run gives them in


@pytest.fixture(scope="module")
def items() -> list[Finding]:
    records, bad = load_results(REPO / RESULTS)
    assert records and not bad
    return findings(grid_runs(records)) + fidelity_seeds.findings(records)  # as `lab report` reads them


@pytest.mark.parametrize("doc", DOCS)
def test_the_docs_table_is_the_reports_byte_for_byte(items, doc: str) -> None:
    text = (REPO / doc).read_text()
    cmd = findings_doc.command(RESULTS, DOCS)
    assert f"`{cmd}`" in text, f"{doc} does not name the command that writes its table"
    assert findings_doc.rewrite(text, items, cmd) == text, (
        f"{doc}'s findings table is not what `{cmd}` writes: regenerate it (scripts/paper-run --report-only)"
    )


def test_a_table_edited_by_hand_is_caught(items) -> None:
    """The attack: a verdict improved by hand (or a number rounded up) in docs/lab.md."""
    cmd = findings_doc.command(RESULTS, DOCS)
    text = (REPO / "docs/lab.md").read_text()
    assert "| **not reproduced** |" in text
    edited = text.replace("| **not reproduced** |", "| **reproduced** |", 1)
    assert findings_doc.rewrite(edited, items, cmd) != edited
    assert findings_doc.rewrite(edited, items, cmd) == text


def test_the_readme_carries_the_counts_not_the_table(items) -> None:
    """The README stays short: the verdict counts and a link; an improved count is caught."""
    cmd = findings_doc.command(RESULTS, DOCS)
    text = (REPO / "README.md").read_text()
    assert "<!-- paper-findings:summary -->" in text and "| **reproduced** |" not in text
    assert f"({findings_doc.summary(items)}; every finding with its reason: [docs/lab.md](docs/lab.md))" in text
    n = sum(1 for f in items if f.verdict == "reproduced")
    edited = text.replace(f"{n} reproduced", f"{n + 1} reproduced", 1)
    assert edited != text and findings_doc.rewrite(edited, items, cmd) == text


def test_compact_keeps_every_row_and_drops_only_the_why(items) -> None:
    full = findings_doc.block(items, "full", "x").splitlines()
    small = findings_doc.block(items, "compact", "x").splitlines()
    assert len(full) == len(small) == len(items) + 6  # markers, command line, blank, header, rule
    rows = zip(full[5:-1], small[5:-1], strict=True)
    assert all(s == f.rsplit(" | ", 1)[0] + " |" for f, s in rows)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("no block at all\n", "no findings block"),
        ("<!-- paper-findings:compact -->\nnever closed\n", "no findings block"),
        (
            "<!-- paper-findings:compact -->\n<!-- /paper-findings -->\n<!-- paper-findings:full -->\n",
            "2 findings blocks opened, 1 closed",
        ),
        ("<!-- paper-findings:wide -->\n<!-- /paper-findings -->\n", "unknown findings block form 'wide'"),
    ],
)
def test_a_file_without_a_well_formed_block_is_refused(items, text: str, words: str) -> None:
    with pytest.raises(findings_doc.MarkerError, match=words):
        findings_doc.rewrite(text, items, "x")


def test_cli_rewrites_only_between_the_markers(tmp_path: Path, no_figures: None) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# title\n\n<!-- paper-findings:compact -->\nstale\n<!-- /paper-findings -->\n\nafter\n")
    out = CliRunner().invoke(
        lab, ["report", str(REPO / RESULTS), "--against-paper", "--out", str(tmp_path / "r"), "--readme", str(readme)]
    )
    assert out.exit_code == 0, out.output
    text = readme.read_text()
    assert text.startswith("# title\n\n<!-- paper-findings:compact -->\n`viplanes lab report ")
    assert text.endswith("<!-- /paper-findings -->\n\nafter\n") and "stale" not in text


def test_cli_refuses_a_file_without_a_block_in_one_line_exit_3(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no table here\n")
    out = CliRunner().invoke(lab, ["report", str(REPO / RESULTS), "--against-paper", "--readme", str(readme)])
    assert out.exit_code == 3, out.output
    assert out.output.strip().count("\n") == 0 and "no findings block" in out.output
    assert readme.read_text() == "# no table here\n"
    out = CliRunner().invoke(lab, ["report", str(REPO / RESULTS), "--readme", str(readme)])
    assert out.exit_code == 2 and "--readme needs --against-paper" in out.output
