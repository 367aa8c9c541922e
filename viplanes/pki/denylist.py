"""The switch-certificate deny-list: SHA-256 fingerprints the controller refuses, in one file.

Why: a switch certificate lives 825 days and a stolen key could otherwise be shut out only by a
pin on every switch or a new CA. The controller re-reads this file when it changes (no restart),
refuses a denied certificate right after its TLS handshake and drops a connected switch that
presents one within seconds (``controller/openflow/denylist.py``).

Format, one certificate a line (``viplanes pki deny`` writes it; the file is 0600)::

    <64 hex digits>  # note: who denied what, when
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from viplanes.pki import PKIError, cert_sha256
from viplanes.privatefile import private_temp

DEFAULT_NAME = "denied-switches"  # inside the PKI directory, unless a path is given


def default_path(pki_dir: Path) -> Path:
    return pki_dir / DEFAULT_NAME


def normalize(text: str) -> str | None:
    """Hex SHA-256 (colons and case allowed) -> lowercase hex; None when it is not one."""
    hexed = text.replace(":", "").strip().lower()
    if len(hexed) != 64 or any(c not in "0123456789abcdef" for c in hexed):
        return None
    return hexed


def parse(text: str) -> tuple[dict[str, str], list[str]]:
    """(fingerprint -> note, the lines that are no fingerprint). Blank and ``#`` lines are skipped."""
    entries: dict[str, str] = {}
    bad: list[str] = []
    for line in text.splitlines():
        body, _, note = line.partition("#")
        if not body.strip():
            continue
        fp = normalize(body)
        if fp is None:
            bad.append(line.strip())
        else:
            entries[fp] = note.strip()
    return entries, bad


def read(path: Path) -> dict[str, str]:
    """The denied fingerprints (none when the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise PKIError(f"{path}: {exc.strerror or exc}") from None
    return parse(text)[0]


def _write(path: Path, entries: dict[str, str]) -> None:
    """Replace the file atomically, created 0600 (never readable by others for a moment)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{fp}  # {note}" if note else fp for fp, note in entries.items()]
    try:  # a random name created exclusively: a symlink planted beside the list is never followed
        fd, tmp = private_temp(path)
    except PermissionError as exc:
        raise PKIError(str(exc)) from None
    try:
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{line}\n" for line in lines))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def fingerprint_of(arg: str) -> tuple[str, str]:
    """(fingerprint, what it is) of a fingerprint or a certificate file (PEM or DER)."""
    fp = normalize(arg)
    if fp is not None:
        return fp, "fingerprint"
    path = Path(arg)
    if not path.is_file():
        raise PKIError(f"{arg!r} is neither a SHA-256 fingerprint (64 hex digits) nor a certificate file")
    try:
        return cert_sha256(path.read_bytes()), str(path)
    except ValueError:
        raise PKIError(f"{path}: not a certificate (PEM or DER)") from None


def deny(path: Path, fingerprint: str, what: str) -> bool:
    """Add ``fingerprint``; False when it was already denied."""
    entries = read(path)
    if fingerprint in entries:
        return False
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries[fingerprint] = f"denied {stamp} ({what})"
    _write(path, entries)
    return True


def undeny(path: Path, fingerprint: str) -> bool:
    """Remove ``fingerprint``; False when it was not denied."""
    entries = read(path)
    if entries.pop(fingerprint, None) is None:
        return False
    _write(path, entries)
    return True
