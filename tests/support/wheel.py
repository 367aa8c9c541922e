"""Build the product's wheel from the working tree and install it into a fresh venv without the
system's site-packages, as an operator or a researcher would (tests of issue 29).

pip's downloads are cached under /var/cache/viplanes/pip, so a rerun installs from the cache in
seconds; the venv itself is made anew each time (a reused one could hold a module the extra
does not bring and hide a missing dependency)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

PIP_CACHE = Path("/var/cache/viplanes/pip")
SOURCES = ["viplanes", "api", "authz", "controller", "policy", "topologies"]  # setup.py COMPONENTS
BUILD_FILES = ["pyproject.toml", "setup.py", "README.md"]  # metadata, the package_dir mapping, the readme


def copy_tree(src: Path) -> None:
    """What a release tarball holds: the build files and the product's folders, no leftovers."""
    src.mkdir(parents=True)
    for name in BUILD_FILES:
        shutil.copy2(REPO / name, src)
    for name in SOURCES:
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))


def build_wheel(out: Path) -> Path:
    """`pip wheel --no-deps` of a clean copy of the tree (no build/ or egg-info leftovers)."""
    src = out / "src"
    copy_tree(src)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("viplanes-*.whl")
    return wheel


def fresh_venv(where: Path, wheel: Path, extra: str) -> Path:
    """A venv (no system site-packages) with ``wheel[extra]`` installed; returns its bin/."""
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(where)], check=True, timeout=120)
    env = {**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    PIP_CACHE.mkdir(parents=True, exist_ok=True)
    pip = [str(where / "bin" / "pip"), "install", "-q", f"{wheel}[{extra}]"]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin"


def server_venv(wheel: Path) -> Path:
    """A venv (no system site-packages) with ``wheel[server]``, kept under /var/cache/viplanes
    per pyproject.toml (its dependency lists): the first run installs the stack (~1 min from PyPI),
    later runs only put this wheel in place of the last (a few seconds). Returns its bin/."""
    import hashlib

    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]
    where = PIP_CACHE.parent / f"server-venv-{key}"
    ready = where / ".installed"
    if not ready.exists():
        for old in PIP_CACHE.parent.glob("server-venv-*"):  # made for an earlier pyproject.toml
            shutil.rmtree(old, ignore_errors=True)
        fresh_venv(where, wheel, "server")
        ready.touch()
        return where / "bin"
    env = {**os.environ, "PIP_CACHE_DIR": str(PIP_CACHE), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [str(where / "bin" / "pip"), "install", "-q", "--no-deps", "--force-reinstall", str(wheel)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return where / "bin"
