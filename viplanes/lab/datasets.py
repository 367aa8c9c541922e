"""Datasets in the paper's shapes, scaled to the lab: one file, and that file split into 10 and 50.

Contents are random (like the paper's dd of /dev/urandom) so nothing along the path can compress
them. A dataset is made once per size and reused.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

SHAPES: dict[str, int] = {"one": 1, "split10": 10, "split50": 50}


@dataclass(frozen=True)
class Dataset:
    name: str  # shape name: one, split10, split50
    path: Path  # directory holding the files
    files: int
    bytes: int


def make_dataset(root: Path, shape: str, total_mb: int) -> Dataset:
    """Create (or reuse) ``root/<total>M/<shape>/``: ``total_mb`` MiB in SHAPES[shape] files."""
    if shape not in SHAPES:
        raise ValueError(f"unknown dataset shape {shape!r} (known: {', '.join(SHAPES)})")
    if total_mb < 1:
        raise ValueError("dataset size must be at least 1 MiB")
    files = SHAPES[shape]
    total = total_mb * 2**20
    path = root / f"{total_mb}M" / shape
    sizes = [total // files + (1 if i < total % files else 0) for i in range(files)]
    names = ["data.bin"] if files == 1 else [f"part{i:02d}" for i in range(files)]
    if not all((path / n).is_file() and (path / n).stat().st_size == s for n, s in zip(names, sizes, strict=True)):
        path.mkdir(parents=True, exist_ok=True)
        for old in path.iterdir():
            old.unlink()
        for name, size in zip(names, sizes, strict=True):
            _random_file(path / name, size)
    return Dataset(shape, path, files, total)


def _random_file(path: Path, size: int, block: int = 2**20) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as out:
        left = size
        while left:
            n = min(block, left)
            out.write(os.urandom(n))
            left -= n
    tmp.replace(path)


def digests(path: Path) -> dict[str, str]:
    """sha256 of every file under ``path``, by relative name (to prove a copy arrived intact)."""
    out = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h = hashlib.sha256()
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(2**20), b""):
                h.update(chunk)
        out[str(f.relative_to(path))] = h.hexdigest()
    return out


def same_content(a: Path, b: Path) -> bool:
    return digests(a) == digests(b)


def seed(dataset: Dataset, target: Path) -> None:
    """Put a dataset into the S3 backend directory (hard links: no copy, same bytes)."""
    target.mkdir(parents=True, exist_ok=True)
    for f in dataset.path.iterdir():
        dst = target / f.name
        if dst.exists():
            dst.unlink()
        try:
            os.link(f, dst)
        except OSError:
            dst.write_bytes(f.read_bytes())
