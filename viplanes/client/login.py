"""`viplanes login`: the campus provider's device authorization grant (RFC 8628), and the stored
login every CLI command uses when no API token is given (docs/identity.md, "The CLI").

Why the device grant: a researcher runs the CLI on a login node over SSH, where no browser can
receive a redirect. The CLI prints a URL and a short code; the person opens it on any device,
signs in at the campus page (password, MFA: the provider's business, never ours) and approves.
The CLI polls the token endpoint, honouring ``interval`` and ``slow_down``, and stores the refresh
token in ``$XDG_CONFIG_HOME/viplanes/login.json``, mode 0600 in a 0700 directory; a file that
others can read is refused, not used. Access tokens are refreshed silently when less than
``REFRESH_MARGIN_S`` of their life is left; a refused refresh (session ended, account disabled)
is a 401 ``login_expired`` (exit code 6). An explicit API token (--token, VIPLANES_TOKEN, the
config file) always wins over the stored login.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import requests

from viplanes.client.http import ApiError
from viplanes.domain.urls import token_safe_url

DEVICE_GRANT = "urn:ietf:params:oauth:grant-type:device_code"
REFRESH_MARGIN_S = 60.0  # refresh an access token with less than this left (clock skew, slow calls)
SLOW_DOWN_S = 5  # RFC 8628 3.5: each slow_down adds 5 s to the polling interval
TIMEOUT_S = 15.0
EXPIRED = "the campus login has expired or was refused; run `viplanes login` again"


class LoginError(Exception):
    """The login could not be made or used; ``code`` names why (``denied``, ``expired``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def login_path() -> Path:
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "viplanes" / "login.json"


def _allowed_url(url: str) -> bool:
    """https, or http to the loopback (tests, a local proxy): a token over plain http is leaked."""
    return token_safe_url(url)


def why_unreachable(exc: Exception) -> str:
    """A failed request in a few words, not urllib3's nested repr (pool, object address, errno)."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return f"it answered HTTP {exc.response.status_code}"
    if isinstance(exc, requests.Timeout):
        return f"no answer within {TIMEOUT_S:.0f} s"
    if isinstance(exc, requests.exceptions.SSLError):
        return "its TLS certificate did not verify"
    if isinstance(exc, ValueError) and not isinstance(exc, requests.RequestException):
        return "its answer is not a discovery document (not JSON)"
    text = str(exc)
    for needle, words in (
        ("Connection refused", "connection refused"),
        ("Name or service not known", "host name not found"),
        ("NameResolutionError", "host name not found"),
        ("No route to host", "no route to host"),
        ("Network is unreachable", "network unreachable"),
    ):
        if needle in text:
            return words
    return exc.__class__.__name__


@dataclass(frozen=True)
class Endpoints:
    device: str
    token: str
    revocation: str | None


def discover(session: requests.Session, issuer: str) -> Endpoints:
    issuer = issuer.rstrip("/")
    if not _allowed_url(issuer):
        raise LoginError("insecure_issuer", f"refusing a plain-http issuer {issuer} (https only)")
    try:
        r = session.get(issuer + "/.well-known/openid-configuration", timeout=TIMEOUT_S, allow_redirects=False)
        r.raise_for_status()
        doc = r.json()
    except (requests.RequestException, ValueError) as exc:
        raise LoginError(
            "unreachable",
            f"cannot reach the identity provider at {issuer}: {why_unreachable(exc)}; "
            "is it running, and is [oidc] issuer (or --issuer) right?",
        ) from None
    if str(doc.get("issuer", "")).rstrip("/") != issuer:
        raise LoginError("wrong_issuer", f"{issuer}'s discovery document names another issuer")
    device = doc.get("device_authorization_endpoint")
    if not isinstance(device, str):
        raise LoginError("no_device_flow", f"{issuer} offers no device authorization endpoint")
    urls = [device, str(doc["token_endpoint"])]
    if not all(_allowed_url(u) for u in urls):
        raise LoginError("insecure_issuer", "the provider's endpoints are not https")
    revocation = doc.get("revocation_endpoint")
    return Endpoints(device, urls[1], revocation if isinstance(revocation, str) and _allowed_url(revocation) else None)


@dataclass(frozen=True)
class DeviceCode:
    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    interval: int
    expires_in: int


def start_device(session: requests.Session, ep: Endpoints, client_id: str, scope: str = "openid") -> DeviceCode:
    r = session.post(ep.device, data={"client_id": client_id, "scope": scope}, timeout=TIMEOUT_S)
    body = _json(r)
    if r.status_code != 200:
        raise LoginError(str(body.get("error", "refused")), f"the provider refused the device login: {_why(body, r)}")
    return DeviceCode(
        device_code=str(body["device_code"]),
        user_code=str(body["user_code"]),
        verification_uri=str(body["verification_uri"]),
        verification_uri_complete=body.get("verification_uri_complete"),
        interval=max(1, int(body.get("interval", 5))),
        expires_in=int(body.get("expires_in", 600)),
    )


def poll_token(
    session: requests.Session,
    ep: Endpoints,
    client_id: str,
    code: DeviceCode,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Ask until the person approves (the token answer), refuses or the code expires."""
    interval = code.interval
    deadline = clock() + code.expires_in
    while clock() < deadline:
        sleep(interval)
        r = session.post(
            ep.token,
            data={"grant_type": DEVICE_GRANT, "device_code": code.device_code, "client_id": client_id},
            timeout=TIMEOUT_S,
        )
        body = _json(r)
        if r.status_code == 200 and "access_token" in body:
            return body
        error = body.get("error")
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_S
            continue
        if error == "access_denied":
            raise LoginError("denied", "the sign-in was refused at the provider")
        if error == "expired_token":
            break
        raise LoginError(str(error or "refused"), f"the provider refused the login: {_why(body, r)}")
    raise LoginError("expired", "the code expired before it was approved; run `viplanes login` again")


def _json(r: requests.Response) -> dict[str, Any]:
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _why(body: dict[str, Any], r: requests.Response) -> str:
    return str(body.get("error_description") or body.get("error") or f"HTTP {r.status_code}")


@dataclass
class StoredLogin:
    issuer: str
    client_id: str
    refresh_token: str
    access_token: str
    expires_at: float  # unix seconds

    @classmethod
    def from_answer(cls, issuer: str, client_id: str, answer: dict[str, Any], now: float) -> StoredLogin:
        return cls(
            issuer=issuer.rstrip("/"),
            client_id=client_id,
            refresh_token=str(answer.get("refresh_token", "")),
            access_token=str(answer["access_token"]),
            expires_at=now + float(answer.get("expires_in", 60)),
        )

    def save(self, path: Path) -> None:
        """Written 0600 to a new file, then renamed over the old one: never readable by others,
        not even for a moment, whatever the umask; a symlink planted at ``path`` is replaced,
        not followed. Refused (:class:`LoginError`) in a directory others may write to."""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _check_place(path, os.stat(path.parent), None)
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(asdict(self), f)
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    @classmethod
    def load(cls, path: Path) -> StoredLogin | None:
        """The stored login, None if there is none; a file others may read is refused."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LoginError("bad_login_file", f"{path}: {exc.strerror}") from None
        with os.fdopen(fd) as f:
            mode = os.fstat(f.fileno()).st_mode
            _check_place(path, os.stat(path.parent), os.fstat(f.fileno()))
            if stat.S_IMODE(mode) & 0o077:
                raise LoginError(
                    "bad_login_file",
                    f"{path} is readable by others (mode {stat.S_IMODE(mode):o}); run `viplanes login`",
                )
            try:
                data = json.load(f)
                return cls(
                    **{k: data[k] for k in ("issuer", "client_id", "refresh_token", "access_token")},
                    expires_at=float(data["expires_at"]),
                )
            except (ValueError, KeyError, TypeError):
                raise LoginError("bad_login_file", f"{path} is not a login; run `viplanes login`") from None


def place_problem(path: Path, parent: os.stat_result, own: os.stat_result | None, uid: int) -> str | None:
    """Why a credentials file at ``path`` cannot be trusted, or None. Others must not be able to
    write its directory (they could swap the file for their own login, or read a future one),
    unless the directory is sticky (/tmp) and the file is ours; and the file must be ours."""
    if own is not None and own.st_uid != uid:
        return f"{path} belongs to another user (uid {own.st_uid}); run `viplanes login`"
    shared = stat.S_IMODE(parent.st_mode) & 0o022
    if shared and not parent.st_mode & stat.S_ISVTX:
        mode = stat.S_IMODE(parent.st_mode)
        return f"{path.parent} is writable by others (mode {mode:o}); keep the login in a private directory"
    if parent.st_uid not in (uid, 0):
        return f"{path.parent} belongs to another user (uid {parent.st_uid}); keep the login in your own directory"
    return None


def _check_place(path: Path, parent: os.stat_result, own: os.stat_result | None) -> None:
    problem = place_problem(path, parent, own, os.geteuid())
    if problem is not None:
        raise LoginError("bad_login_file", problem)


class LoginBearer:
    """The ``bearer`` of an :class:`ApiClient`: the stored access token, refreshed (and saved,
    with the provider's rotated refresh token) when it is near expiry. Thread-safe: the
    transfer's renewal thread and its main thread share one."""

    def __init__(
        self,
        stored: StoredLogin,
        path: Path,
        session: requests.Session | None = None,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.stored, self.path, self.now = stored, path, now
        self.session = session or requests.Session()
        self.refreshes = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            if self.stored.expires_at - self.now() <= REFRESH_MARGIN_S:
                self._refresh()
            return self.stored.access_token

    def _refresh(self) -> None:
        if not self.stored.refresh_token:
            raise ApiError(401, "login_expired", EXPIRED)
        try:
            ep = discover(self.session, self.stored.issuer)
            r = self.session.post(
                ep.token,
                data={
                    "grant_type": "refresh_token",
                    "refresh_token": self.stored.refresh_token,
                    "client_id": self.stored.client_id,
                },
                timeout=TIMEOUT_S,
            )
        except LoginError as exc:
            raise ApiError(0, "unreachable", str(exc)) from None
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable", f"cannot reach the provider: {exc.__class__.__name__}") from None
        body = _json(r)
        if r.status_code != 200 or "access_token" not in body:
            if r.status_code >= 500:
                raise ApiError(0, "unreachable", f"the provider answered {r.status_code}")
            raise ApiError(401, "login_expired", f"{EXPIRED} ({_why(body, r)})")
        new = StoredLogin.from_answer(self.stored.issuer, self.stored.client_id, body, self.now())
        if not new.refresh_token:  # the provider kept the old refresh token
            new.refresh_token = self.stored.refresh_token
        new.save(self.path)
        self.stored = new
        self.refreshes += 1


def bearer_for(explicit_token: str | None, path: Path | None = None) -> LoginBearer | None:
    """The stored login to call the API with, unless an explicit API token is given (it wins)."""
    if explicit_token:
        return None
    path = path or login_path()
    stored = StoredLogin.load(path)
    return None if stored is None else LoginBearer(stored, path)


def logout(path: Path | None = None, session: requests.Session | None = None) -> bool:
    """Revoke the refresh token at the provider (best effort) and delete the stored login."""
    path = path or login_path()
    try:
        stored = StoredLogin.load(path)
    except LoginError:
        stored = None
    if stored is None and not path.exists():
        return False
    if stored is not None and stored.refresh_token:
        session = session or requests.Session()
        try:
            ep = discover(session, stored.issuer)
            if ep.revocation:
                session.post(
                    ep.revocation,
                    data={
                        "token": stored.refresh_token,
                        "token_type_hint": "refresh_token",
                        "client_id": stored.client_id,
                    },
                    timeout=TIMEOUT_S,
                )
        except (LoginError, requests.RequestException):
            pass  # the file goes anyway: the token then ends with the provider's session
    path.unlink(missing_ok=True)
    return True
