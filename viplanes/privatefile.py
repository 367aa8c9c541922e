"""Files that must be ours alone, written beside their final name and renamed over it.

A predictable temporary name (``.NAME.partial``, ``NAME.tmp``) in a directory another user can
write to is theirs to plant first: a file of theirs we then fill (they own root's backup) or a
symlink we write through. So the temporary file gets a random name, created exclusively, and a
directory others may write to without the sticky bit (they could rename ours away and put theirs
in its place) is refused. Used by backups and the switch deny-list; imports nothing of ours.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

PRIVATE = 0o600


def shared_dir_problem(directory: Path) -> str | None:
    """Why files written into ``directory`` could be swapped or stolen by others, or None: a
    directory others may write to without the sticky bit (/tmp has it) lets them rename our
    file away and put theirs in its place."""
    st = os.stat(directory)
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022 and not mode & stat.S_ISVTX:
        return f"{directory} is writable by others (mode {mode:04o}, no sticky bit); use a private directory"
    return None


def private_temp(dest: Path) -> tuple[int, Path]:
    """A new, empty file beside ``dest`` to be renamed over it: a random name created with
    O_CREAT|O_EXCL|O_NOFOLLOW (``mkstemp``), mode 0600, so nothing planted there beforehand (a
    file of another owner, a symlink) is ever opened. Refuses (``PermissionError``) a
    directory others may write to without the sticky bit."""
    problem = shared_dir_problem(dest.parent)
    if problem is not None:
        raise PermissionError(problem)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    os.fchmod(fd, PRIVATE)
    return fd, Path(name)
