"""Every file, folder and file:function the docs name exists, so a newcomer's one hop lands.

The README's "Where is..." table promises one hop from a question to a function; a move or a
rename that forgets the docs breaks that promise silently. Checked: backticked repository paths
(with a ``/``), ``path.py:name`` and ``path.py::test`` references, and relative Markdown links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted(
    [REPO / "README.md", REPO / "bench" / "README.md", REPO / "topologies" / "README.md", *REPO.glob("docs/*.md")]
)
# `a/b.py`, `a/b.py:Name.method`, `tests/x.py::test_name`, `a/b/` (a folder)
CODE_REF = re.compile(r"`([\w.-]+(?:/[\w.-]+)+/?)(?:(::?)([\w.]+))?`")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
SUFFIXES = {".py", ".md", ".yaml", ".json", ".jsonl", ".ini", ".sh", ".toml", ".html", ".png", ".mako"}


def _is_repo_path(path: str) -> bool:
    """A file or folder of this repository, not a URL path, a prefix or a placeholder (``NAME``)."""
    first = path.split("/", 1)[0]
    return (
        (first == ".." or (REPO / first).exists() or first in ("docs", "img", "grafana"))
        and (path.endswith("/") or Path(path).suffix in SUFFIXES)
        and not re.search(r"\b[A-Z]{2,}\b", path)
    )


def _refs(doc: Path) -> list[tuple[str, str, str]]:
    text = doc.read_text()
    found = [(m.group(1), m.group(2) or "", m.group(3) or "") for m in CODE_REF.finditer(text)]
    found += [(m.group(1), "", "") for m in LINK.finditer(text) if "://" not in m.group(1)]
    return [r for r in found if _is_repo_path(r[0])]


def _resolve(doc: Path, path: str) -> Path | None:
    for base in (REPO, doc.parent):
        candidate = base / path
        if candidate.exists():
            return candidate
    return None


def _defines(source: str, dotted: str) -> bool:
    """Whether ``source`` defines ``dotted``: a function, class or constant, or ``Class.method``."""
    *owner, name = dotted.split(".")
    if owner and not re.search(rf"^class {re.escape(owner[-1])}\b", source, re.M):
        return False
    return bool(re.search(rf"^\s*(?:async def|def|class) {re.escape(name)}\b|^{re.escape(name)}\s*[:=]", source, re.M))


CASES = [(doc, ref) for doc in DOCS for ref in _refs(doc)]


@pytest.mark.parametrize(("doc", "ref"), CASES, ids=[f"{d.relative_to(REPO)}:{r[0]}{r[1]}{r[2]}" for d, r in CASES])
def test_named_path_exists(doc: Path, ref: tuple[str, str, str]) -> None:
    path, sep, name = ref
    target = _resolve(doc, path)
    assert target is not None, f"{doc.relative_to(REPO)} names {path}, which does not exist"
    if name:
        assert _defines(target.read_text(), name), f"{doc.relative_to(REPO)}: {path} defines no {name}"


def test_the_readme_answers_the_newcomers_questions() -> None:
    """The three questions of the architecture issue, each answered in one hop."""
    readme = (REPO / "README.md").read_text()
    for question, answer in [
        ("where a lane becomes flow rules", "`controller/compile/lane.py:compile_lane`"),
        ("where a lane request is authorized", "`policy/rules.py:decide`"),
        ("where lane state changes", "`viplanes/lanes/states.py:change`"),
    ]:
        row = next((line for line in readme.splitlines() if line.startswith(f"| {question} |")), "")
        assert answer in row, f"README: '{question}' should point at {answer}"


def test_the_readme_stays_short() -> None:
    """A newcomer reads the README top to bottom: at most 160 lines, details in docs/."""
    lines = (REPO / "README.md").read_text().count("\n")
    assert lines <= 160, f"README.md has {lines} lines (at most 160): move detail to docs/"


ANCHOR_LINK = re.compile(r"\]\(([\w./-]*\.md)?#([^)\s]+)\)")


def _slugs(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#{1,6} (.+)$", doc.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_section_link_lands_on_a_heading(doc: Path) -> None:
    dead = []
    for m in ANCHOR_LINK.finditer(doc.read_text()):
        target = (doc.parent / m.group(1)).resolve() if m.group(1) else doc
        if target.exists() and m.group(2) not in _slugs(target):
            dead.append(f"{m.group(1) or ''}#{m.group(2)}")
    assert not dead, f"{doc.name}: links to no heading: {dead}"
