"""The built wheel holds every module of the product, so a non-editable install (the container
image, /opt/viplanes of docs/deploy.md) has the `viplanes` command and all it imports.

The failure this stands for: setup.py listed its packages by hand and left viplanes.cli (and the
domain, the store, the lane service...) out; editable installs hid it, and `pip install .` gave a
`viplanes` script that died with ModuleNotFoundError."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.support.wheel import SOURCES, copy_tree


def test_the_wheel_carries_every_product_module(tmp_path: Path) -> None:
    src = tmp_path / "src"
    copy_tree(src)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("viplanes-*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    folder = {"viplanes": "viplanes", "api": "viplanes/api", "authz": "viplanes/authz"}
    folder |= {"controller": "viplanes/controller", "policy": "viplanes/policy", "topologies": "viplanes/topologies"}
    missing = [
        f"{folder[name]}/{py.relative_to(src / name)}"
        for name in SOURCES
        for py in (src / name).rglob("*.py")
        if f"{folder[name]}/{py.relative_to(src / name)}" not in inside
    ]
    assert not missing, missing
    assert "viplanes/topologies/campus.yaml" in inside
