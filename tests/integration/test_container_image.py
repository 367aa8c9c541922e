"""The container image of deploy/Containerfile, built by scripts/build-image (podman, no daemon,
a Debian base from the apt mirror) and run in both roles the way docs/deploy.md says: as uid
10001, read-only root, no capabilities, no new privileges, one writable volume, JSON logs, against
a real PostgreSQL that starts empty (the image migrates it).
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
LIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]
HARDENED = ["--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges", "--network", "host"]


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
    pki, state = tmp_path / "pki", tmp_path / "state"
    subprocess.run(
        [str(REPO / ".venv/bin/viplanes"), "pki", "init", "--dir", str(pki)], check=True, capture_output=True
    )
    _readable_by_service(pki, 0o750)
    for f in ("ca.crt", "controller.crt", "controller.key"):
        _readable_by_service(pki / f, 0o640)
    state.mkdir()
    os.chown(state, 10001, 10001)
    os.chmod(state, 0o700)
    api_port, of_port = free_port(), free_port()
    ctl, api = f"vl-ctl-{uuid.uuid4().hex[:8]}", f"vl-api-{uuid.uuid4().hex[:8]}"
    common = [*HARDENED, *LIMITS, "-v", f"{state}:/var/lib/viplanes", "-e", f"VIPLANES_DB_URL={db}"]
    names.append(ctl)
    podman(
        "run", "-d", "--name", ctl, *common, "-v", f"{pki}:/etc/viplanes/pki:ro", "-e", "VIPLANES_PKI=/etc/viplanes/pki",
        image, "controller", "cluster", "--openflow", f"127.0.0.1:{of_port}",
    )  # fmt: skip
    time.sleep(3)  # the controller migrates the empty database first
    names.append(api)
    podman("run", "-d", "--name", api, *common, image, "api", "--listen", f"127.0.0.1:{api_port}", "--workers", "1")

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
