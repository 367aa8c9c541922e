"""One claim of a paper held against the lab (`Finding`), its verdicts, and the table they print as.

Shared by the fidelity modules (`fidelity.py` gathers them) and by `findings_doc.py`, which writes
the same table into the README and docs/lab.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

REPRODUCED, NOT_REPRODUCED, NOT_APPLICABLE = "reproduced", "not reproduced", "not applicable"
NO_DATA = "no lab runs for it in these results"


@dataclass(frozen=True)
class Finding:
    source: str  # where the paper says it
    claim: str
    paper: str  # the paper's number(s)
    lab: str  # the lab's number(s), scaled back to real Mbit/s
    verdict: str
    reason: str


def verdict(ok: bool) -> str:
    return REPRODUCED if ok else NOT_REPRODUCED


HEADER = ["source", "finding", "paper (Mbit/s)", "lab x10 (Mbit/s)", "verdict", "why"]


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table; a "|" inside a cell becomes "/" so it cannot open a column."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for cells in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def markdown(items: list[Finding]) -> str:
    return table(HEADER, [[f.source, f.claim, f.paper, f.lab, f"**{f.verdict}**", f.reason] for f in items])
