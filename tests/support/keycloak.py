"""A real Keycloak for the integration tests: fetched once from Maven Central, started in dev mode.

``fetch()`` brings ``org.keycloak:keycloak-quarkus-dist`` (zip, ~170 MB) with Maven into
``CACHE`` and unpacks it; ``scripts/setup.sh`` calls it (``python -m tests.support.keycloak``) so
CI has it before the tests run, and a second run costs nothing. ``Keycloak`` starts
``kc.sh start-dev`` on a free loopback port with its H2 database in a temporary directory, then
creates the realm from ``tests/fixtures/keycloak/viplanes-realm.json`` through the admin REST API
(``--import-realm`` reads only from the install's own data/ directory, which is shared).

Keycloak 26 needs Java 21 or newer; the machine's default is 17, so the newest JDK under
/usr/lib/jvm is used. Start time on this 2-core machine: 14 s quiet, ~100 s loaded (docs/identity.md).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests

from tests.support.procs import free_port

VERSION = "26.7.3"
CACHE = Path(os.environ.get("VIPLANES_KEYCLOAK_CACHE", "/var/cache/viplanes/keycloak"))
REALM_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "keycloak" / "viplanes-realm.json"
REALM = "viplanes"
ADMIN = ("admin", "admin-test-pass")


def home() -> Path:
    return CACHE / f"keycloak-{VERSION}"


def fetch() -> Path:
    """The unpacked distribution, fetched and unpacked once."""
    kc = home()
    if (kc / "bin" / "kc.sh").exists():
        return kc
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"keycloak-quarkus-dist-{VERSION}.zip"
    if not archive.exists():
        subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "dependency:copy",
                f"-Dartifact=org.keycloak:keycloak-quarkus-dist:{VERSION}:zip",
                f"-DoutputDirectory={CACHE}",
            ],
            check=True,
            cwd=CACHE,
            timeout=600,  # a 156 MB zip from Maven Central: ~7 s here, a stuck mirror must not hang
        )
    partial = CACHE / f".unpack-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(archive) as z:
        z.extractall(partial)
    for script in (partial / f"keycloak-{VERSION}" / "bin").glob("*.sh"):
        script.chmod(0o755)
    os.replace(partial / f"keycloak-{VERSION}", kc)  # atomic: a half-unpacked tree is never used
    shutil.rmtree(partial, ignore_errors=True)
    return kc


def java_home() -> Path:
    """The newest JDK >= 21 under /usr/lib/jvm (Keycloak 26 refuses 17)."""
    found: list[tuple[int, Path]] = []
    for jdk in Path("/usr/lib/jvm").glob("*"):
        m = re.search(r"-(\d+)(?=[-.]|$)", jdk.name)
        if m and int(m.group(1)) >= 21 and (jdk / "bin" / "java").exists():
            found.append((int(m.group(1)), jdk))
    if not found:
        raise RuntimeError("Keycloak 26 needs a JDK >= 21 under /usr/lib/jvm; none found")
    return max(found)[1]


class Keycloak:
    """One dev-mode Keycloak with the viplanes realm; ``stop()`` ends it."""

    def __init__(self, workdir: Path, ready_s: float = 240, realm: str = REALM) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.realm = realm
        self.log = workdir / "keycloak.log"
        self.ready_s = ready_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in_s = 0.0
        self.owner = True  # False on a realm's view: stop() leaves the shared server running

    @property
    def issuer(self) -> str:
        return f"{self.url}/realms/{self.realm}"

    def start(self) -> Keycloak:
        kc = fetch()
        env = dict(
            os.environ,
            JAVA_HOME=str(java_home()),
            KC_BOOTSTRAP_ADMIN_USERNAME=ADMIN[0],
            KC_BOOTSTRAP_ADMIN_PASSWORD=ADMIN[1],
        )
        db = self.workdir / "h2" / "keycloakdb"
        t0 = time.monotonic()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    "bash",
                    str(kc / "bin" / "kc.sh"),
                    "start-dev",
                    f"--http-port={self.port}",
                    "--http-host=127.0.0.1",
                    f"--db-url=jdbc:h2:file:{db};NON_KEYWORDS=VALUE",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = t0 + self.ready_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"keycloak exited {self.proc.returncode}; see {self.log}")
            try:
                if requests.get(f"{self.url}/realms/master", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"keycloak not up after {self.ready_s:.0f} s; see {self.log}")
            time.sleep(0.5)
        self.import_realm(self.realm)
        self.started_in_s = time.monotonic() - t0
        return self

    def admin_token(self) -> str:
        r = requests.post(
            f"{self.url}/realms/master/protocol/openid-connect/token",
            data={"grant_type": "password", "client_id": "admin-cli", "username": ADMIN[0], "password": ADMIN[1]},
            timeout=30,
        )
        r.raise_for_status()
        return str(r.json()["access_token"])

    def admin(self, method: str, path: str, body: Any = None) -> requests.Response:
        r = requests.request(
            method,
            f"{self.url}/admin/realms{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.admin_token()}"},
            timeout=60,
        )
        r.raise_for_status()
        return r

    def import_realm(self, name: str) -> None:
        """The fixture realm under ``name``: each test module gets its own, so modules share one server
        without seeing each other's users, groups and sessions."""
        body = json.loads(REALM_FILE.read_text())
        body["realm"] = name
        self.admin("POST", "", body)

    def view(self, realm: str) -> Keycloak:
        """This server seen through ``realm`` (issuer, admin paths); its stop() is a no-op."""
        v = copy.copy(self)
        v.realm, v.owner = realm, False
        return v

    def password_token(self, user: str, password: str, client_id: str = "viplanes-test") -> str:
        """An access token by the password grant (enabled only on the test-only clients)."""
        r = requests.post(
            f"{self.issuer}/protocol/openid-connect/token",
            data={"grant_type": "password", "client_id": client_id, "username": user, "password": password},
            timeout=30,
        )
        r.raise_for_status()
        return str(r.json()["access_token"])

    def user_id(self, username: str) -> str:
        users = self.admin("GET", f"/{self.realm}/users?username={username}&exact=true").json()
        return str(users[0]["id"])

    def stop(self) -> None:
        if not self.owner or self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, 15)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait(10)


if __name__ == "__main__":
    print(fetch())
    sys.exit(0)


@contextmanager
def server(workdir: Path) -> Iterator[Keycloak]:
    """One Keycloak for the whole test session (started when a module first asks), stopped on exit."""
    kc = Keycloak(workdir).start()
    try:
        print(f"keycloak ready in {kc.started_in_s:.1f} s")
        yield kc
    finally:
        kc.stop()


@contextmanager
def realm(kc: Keycloak, name: str, access_token_s: int | None = None) -> Iterator[Keycloak]:
    """A fresh copy of the fixture realm named ``name`` on the shared server, deleted on exit;
    ``access_token_s`` shortens its token lifetime (the membership tests wait out a bound built
    on it)."""
    kc.import_realm(name)
    try:
        if access_token_s is not None:
            kc.admin("PUT", f"/{name}", {"accessTokenLifespan": access_token_s})
        yield kc.view(name)
    finally:
        kc.admin("DELETE", f"/{name}")
