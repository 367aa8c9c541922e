"""The findings table written into a Markdown file between two marker comments.

The README and docs/lab.md carry the report's table, not a copy typed by hand: `viplanes lab
report RESULTS --against-paper --readme FILE` rewrites every marked block of FILE from the
findings, so a table edited by hand (or left behind by a new run) differs from what the command
gives, and the unit test that regenerates it from the recorded run fails.

A block opens with ``<!-- paper-findings:full -->`` (every column, the report's table byte for
byte), ``<!-- paper-findings:compact -->`` (the same rows without the "why" column) or
``<!-- paper-findings:summary -->`` (the verdict counts only, for the README, pointing at
docs/lab.md's table) and closes with ``<!-- /paper-findings -->``, each alone at the start of a
line. Its first line names the command that wrote it and counts the verdicts. Pure: text in, text
out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from .finding import NOT_APPLICABLE, NOT_REPRODUCED, REPRODUCED, Finding, markdown, table

FORMS = ("full", "compact", "summary")
TABLE_AT = "docs/lab.md"  # where the summary form sends the reader for the rows
END = "<!-- /paper-findings -->"
# markers count only at the start of a line, so prose may quote them
OPEN = re.compile(r"^<!-- paper-findings:", re.MULTILINE)
CLOSE = re.compile("^" + re.escape(END) + "$", re.MULTILINE)
BLOCK = re.compile(r"^<!-- paper-findings:(?P<form>[a-z]+) -->\n.*?^" + re.escape(END) + "$", re.DOTALL | re.MULTILINE)
COMPACT_HEADER = ["source", "finding", "paper (Mbit/s)", "lab x10 (Mbit/s)", "verdict"]


class MarkerError(ValueError):
    """The file has no findings block, an unknown form, or a block left open."""


def command(results: str, readmes: Sequence[str]) -> str:
    """The command that regenerates the blocks, as the reader should type it (from the repo root)."""
    return f"viplanes lab report {results} --against-paper" + "".join(f" --readme {r}" for r in readmes)


def summary(items: Sequence[Finding]) -> str:
    n = Counter(f.verdict for f in items)
    return (
        f"{len(items)} findings: {n[REPRODUCED]} reproduced, {n[NOT_REPRODUCED]} not reproduced, "
        f"{n[NOT_APPLICABLE]} not applicable"
    )


def compact(items: Sequence[Finding]) -> str:
    return table(COMPACT_HEADER, [[f.source, f.claim, f.paper, f.lab, f"**{f.verdict}**"] for f in items])


def block(items: Sequence[Finding], form: str, cmd: str) -> str:
    if form not in FORMS:
        raise MarkerError(f"unknown findings block form {form!r} (expected one of {', '.join(FORMS)})")
    if form == "summary":
        return f"<!-- paper-findings:summary -->\n`{cmd}` ({summary(items)}; every finding with its reason: [{TABLE_AT}]({TABLE_AT}))\n{END}"
    table = markdown(list(items)) if form == "full" else compact(items)
    return f"<!-- paper-findings:{form} -->\n`{cmd}` ({summary(items)}):\n\n{table}{END}"


def check(text: str) -> None:
    """MarkerError unless ``text`` has at least one findings block, each closed, of a known form."""
    opened, closed = len(OPEN.findall(text)), len(CLOSE.findall(text))
    found = list(BLOCK.finditer(text))
    if not found:
        raise MarkerError(f"no findings block: put `<!-- paper-findings:compact -->` and `{END}` where it goes")
    if opened != len(found) or closed != len(found):
        raise MarkerError(f"{opened} findings blocks opened, {closed} closed: each needs one {END}")
    for m in found:
        if m["form"] not in FORMS:
            raise MarkerError(f"unknown findings block form {m['form']!r} (expected one of {', '.join(FORMS)})")


def rewrite(text: str, items: Sequence[Finding], cmd: str) -> str:
    """``text`` with every findings block regenerated; MarkerError when there is none to fill."""
    check(text)
    return BLOCK.sub(lambda m: block(items, m["form"], cmd), text)
