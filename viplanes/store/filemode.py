"""Files that hold secrets (the database, backups) are created readable by their owner only.

``open()`` and SQLite create files with mode 0666 minus the umask: 0644 under the usual 022, so a
``viplanes.db`` holding token hashes, grants and the audit log was readable by every local user.
Creating the file 0600 before SQLite first opens it is enough for its companions too: SQLite gives
the ``-wal`` and ``-shm`` files the mode of the database file they belong to.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE = 0o600


def create_private(path: Path) -> bool:
    """Create ``path`` empty with mode 0600 if it does not exist; True when this call made it.

    An existing file is left as it is (its mode is the operator's; ``viplanes doctor`` reports
    one that others can read). A symlink at ``path`` is not followed."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE)  # a umask cannot widen it, but an ACL default could
    finally:
        os.close(fd)
    return True


def open_private(path: Path) -> int:
    """A write descriptor on ``path``, truncated, mode 0600 (a stale file of ours is reused,
    never a symlink someone planted)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE)
    os.fchmod(fd, PRIVATE)
    return fd


def sqlite_file(url_database: str | None) -> Path | None:
    """The file of a SQLite URL's database part (None: in memory)."""
    if url_database in (None, "", ":memory:") or str(url_database).startswith("file:"):
        return None
    return Path(str(url_database))


def private_mode_problem(path: Path) -> str | None:
    """Why ``path``'s mode exposes it (group or others may read or write), or None."""
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        return f"{path} is mode {mode:04o}; others can read it (chmod 600 {path})"
    return None
