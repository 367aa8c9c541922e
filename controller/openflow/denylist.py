"""The listener's view of the switch-certificate deny-list file (``viplanes pki deny``), re-read
whenever it changes, so a stolen switch key is shut out without a restart.

Why a stat per look and not inotify: the file is looked at on each finished TLS handshake and
once per ``CHECK_S`` by the listener's watcher; a stat is microseconds, works on every file
system, and sees a file replaced by ``os.replace`` (new inode) as well as one edited in place.
A file that cannot be read keeps the last list read (a denial never lapses because of a bad
write); lines that are no fingerprint are logged and skipped.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

from viplanes.pki import cert_sha256
from viplanes.pki import denylist as pki_denylist

LOG = logging.getLogger("viplanes.controller.openflow.admission")
CHECK_S = 1.0  # how often the listener's watcher looks at the file (a denied switch drops within it)


class DenyList:
    """Denied certificate fingerprints from ``path`` (None: no deny-list). Thread-safe."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._denied: frozenset[str] = frozenset()
        self.generation = 0  # bumped on each change of the list: the watcher's cue
        self.refresh()

    def refresh(self) -> frozenset[str]:
        """The current list, re-read when the file's mtime, size or inode changed."""
        if self.path is None:
            return self._denied
        with self._lock:
            try:
                st = os.stat(self.path)
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            except FileNotFoundError:
                stamp = (0, 0, 0)  # no file: nothing denied
            except OSError as exc:
                LOG.error("switch deny-list %s unreadable (%s): keeping the last list read", self.path, exc)
                return self._denied
            if stamp == self._stamp:
                return self._denied
            denied = self._load(stamp)
            if denied is None:
                return self._denied
            self._stamp = stamp
            if denied != self._denied:
                LOG.warning(
                    "switch deny-list %s: %d certificate(s) denied (%d added, %d removed)",
                    self.path,
                    len(denied),
                    len(denied - self._denied),
                    len(self._denied - denied),
                )
                self._denied = denied
                self.generation += 1
            return self._denied

    def _load(self, stamp: tuple[int, int, int]) -> frozenset[str] | None:
        if stamp == (0, 0, 0) or self.path is None:
            return frozenset()
        try:
            text = self.path.read_text()
        except OSError as exc:
            LOG.error("switch deny-list %s unreadable (%s): keeping the last list read", self.path, exc)
            return None
        if stat.S_IMODE(os.stat(self.path).st_mode) & 0o022:  # whoever can write it can undeny
            LOG.error("switch deny-list %s is writable by group or others: make it 0600", self.path)
        entries, bad = pki_denylist.parse(text)
        for line in bad:
            LOG.error("switch deny-list %s: %r is no SHA-256 fingerprint; skipped", self.path, line)
        return frozenset(entries)

    def denies(self, cert_der: bytes | None) -> str | None:
        """The fingerprint when ``cert_der`` is denied, else None (no certificate: plain TCP)."""
        if cert_der is None or self.path is None:
            return None
        fp = cert_sha256(cert_der)
        return fp if fp in self.refresh() else None
