"""The container image of deploy/Containerfile, built by scripts/build-image (podman, no daemon,
a Debian base from the apt mirror) and run in both roles the way docs/deploy.md says: as uid
10001, read-only root, no capabilities, no new privileges, one writable volume, JSON logs, against
a real PostgreSQL that starts empty (the image migrates it). The two `podman run` lines are
docs/deploy.md's own (tests/support/deploydoc.py), with only the image tag, names, volumes and
the config directory replaced; every setting comes from the mounted viplanes.toml.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.deploydoc import argv, block, substitute
from tests.support.postgres import PgCluster
from tests.support.procs import free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]  # the image build: up to 1500 s

REPO = Path(__file__).resolve().parents[2]
CTR = Path("/var/cache/viplanes/ctr")
# the defaults of scripts/build-image: the suite's own store, and flags that work in a nested
# container with hybrid cgroups and a low hard RLIMIT_NPROC/NOFILE
PODMAN = [
    "podman",
    "--root",
    str(CTR / "storage"),
    "--runroot",
    "/run/viplanes-ctr",
    "--storage-driver",
    "overlay",
    "--runtime",
    "runc",
    "--cgroup-manager",
    "cgroupfs",
]


def doc_runs() -> dict[str, list[str]]:
    """docs/deploy.md's `podman run` lines, by role (api, controller)."""
    runs = [argv(c) for c in block("container-run") if argv(c)[:2] == ["podman", "run"]]
    return {"api" if run[-1] == "api" else "controller": run for run in runs}


def podman(*args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=check)


@pytest.fixture(scope="module")
def image() -> str:
    if subprocess.run(["which", "podman", "debootstrap"], capture_output=True).returncode:
        pytest.fail("podman/debootstrap missing: scripts/setup.sh installs them")
    built = subprocess.run([str(REPO / "scripts/build-image")], capture_output=True, text=True, timeout=1500, cwd=REPO)
    assert built.returncode == 0, f"the image did not build: {built.stderr[-2000:]}"
    return built.stdout.split()[-1]


@pytest.fixture
def names() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        podman("rm", "-f", "-t", "5", name, check=False)


def _readable_by_service(path: Path, mode: int) -> None:
    os.chown(path, 0, 10001)
    os.chmod(path, mode)


def _get(url: str) -> tuple[int, dict[str, str], object]:
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, json.loads(e.read())


def test_image_runs_both_roles_unprivileged(
    image: str, pg_cluster: PgCluster, tmp_path: Path, names: list[str]
) -> None:
    db = pg_cluster.empty_database()
    etc, states = tmp_path / "etc", {role: tmp_path / f"state-{role}" for role in ("api", "controller")}
    pki = etc / "pki"
    etc.mkdir()
    _readable_by_service(etc, 0o750)
    subprocess.run(
        [str(REPO / ".venv/bin/viplanes"), "pki", "init", "--dir", str(pki)], check=True, capture_output=True
    )
    _readable_by_service(pki, 0o750)
    for f in ("ca.crt", "controller.crt", "controller.key"):
        _readable_by_service(pki / f, 0o640)
    (etc / "campus.yaml").write_text((REPO / "topologies" / "campus.yaml").read_text())
    _readable_by_service(etc / "campus.yaml", 0o640)
    api_port, of_port = free_port(), free_port()
    (etc / "viplanes.toml").write_text(
        f'[db]\nurl = "{db}"\n\n'
        f'[api]\nlisten = "127.0.0.1:{api_port}"\nworkers = 1\ntopology = "/etc/viplanes/campus.yaml"\n\n'
        f'[controller]\nopenflow = "127.0.0.1:{of_port}"\npki = "/etc/viplanes/pki"\n'
        'topology = "/etc/viplanes/campus.yaml"\n'
    )
    _readable_by_service(etc / "viplanes.toml", 0o640)
    for state in states.values():
        state.mkdir()
        os.chown(state, 10001, 10001)
        os.chmod(state, 0o700)
    ctl, api = f"vl-ctl-{uuid.uuid4().hex[:8]}", f"vl-api-{uuid.uuid4().hex[:8]}"
    subs = {
        "viplanes-api:/var/lib/viplanes": f"{states['api']}:/var/lib/viplanes",
        "viplanes-ctl:/var/lib/viplanes": f"{states['controller']}:/var/lib/viplanes",
        "/etc/viplanes:/etc/viplanes:ro": f"{etc}:/etc/viplanes:ro",
        "viplanes-controller": ctl,
        "viplanes-api": api,
    }
    runs = doc_runs()

    def start(role: str) -> None:
        run = substitute(runs[role], subs)
        image_at = run.index("viplanes")  # the image, as the doc tags it
        podman(*run[1:image_at], image, *run[image_at + 1 :])

    names.append(ctl)
    start("controller")
    time.sleep(3)  # the controller migrates the empty database first
    names.append(api)
    start("api")

    health = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            health = _get(f"http://127.0.0.1:{api_port}/healthz")
            break
        except OSError:
            time.sleep(0.5)
    logs = podman("logs", api, check=False)
    assert health is not None, f"the API container never answered: {logs.stdout[-1500:]} {logs.stderr[-1500:]}"
    assert health[0] == 200
    ready = _get(f"http://127.0.0.1:{api_port}/readyz")
    assert ready[0] in (200, 503) and isinstance(ready[2], dict)  # 503 until switches connect
    assert ready[1].get("x-request-id"), sorted(ready[1])
    # security by default holds inside the image too
    status, _, body = _get(f"http://127.0.0.1:{api_port}/api/v1/lanes")
    assert status == 401 and isinstance(body, dict), body

    for name in (ctl, api):
        assert podman("exec", name, "id", "-u").stdout.strip() == "10001"
        wrote = podman("exec", name, "touch", "/opt/viplanes/x", check=False)
        assert wrote.returncode != 0, f"{name}: the image's root is writable"
        caps = podman("exec", name, "grep", "CapEff", "/proc/self/status").stdout.split()[-1]
        assert int(caps, 16) == 0, f"{name}: effective capabilities {caps}"

    for name in (ctl, api):
        podman("stop", "-t", "20", name, timeout=40)
        code = podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        out = podman("logs", name)
        lines = [json.loads(x) for x in (out.stdout + out.stderr).splitlines() if x.startswith("{")]
        assert code == "0", f"{name} exited {code}: {out.stderr[-1500:]}"
        assert lines, f"{name}: no JSON log lines"
