"""The shell commands docs/deploy.md shows, read from the page itself so the tests that run them
(the install end to end, the container image) cannot drift from what an operator copies.

A block is the first ```sh fence after a ``<!-- deploy-doc: NAME -->`` marker; a line ending in
a backslash continues on the next; comments after `#` go. The tests substitute only what must
differ on a test machine (paths, names, the version), through ``substitute``.
"""

from __future__ import annotations

import re
import shlex

from tests.support.paths import REPO

DOC = REPO / "docs" / "deploy.md"


def block(name: str, text: str | None = None) -> list[str]:
    """The commands of block ``name``, one string per command, continuations joined."""
    text = DOC.read_text() if text is None else text
    m = re.search(rf"<!-- deploy-doc: {re.escape(name)} -->\s*```sh\n(.*?)```", text, re.S)
    assert m is not None, f"docs/deploy.md has no ```sh block after <!-- deploy-doc: {name} -->"
    commands: list[str] = []
    pending = ""
    for raw in m.group(1).splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            commands.append(line)
    return commands


def argv(command: str) -> list[str]:
    """One command as argv, its trailing comment dropped."""
    return shlex.split(command, comments=True)


def substitute(args: list[str], subs: dict[str, str]) -> list[str]:
    """Each argument with every key of ``subs`` replaced (longest first, so a path's prefix does
    not win over the path)."""
    out = []
    for arg in args:
        for old in sorted(subs, key=len, reverse=True):
            arg = arg.replace(old, subs[old])
        out.append(arg)
    return out
