"""A small HTTP client of the VIP Lanes API, used by the CLI, the lab and the benchmarks."""

from __future__ import annotations

import ssl
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import requests

from viplanes.client import diagnose
from viplanes.config import ClientConfig

ENDED = {"failed", "expired", "released", "revoked"}
CONNECT_S = 5.0  # TCP connect and TLS handshake: a server speaking another protocol stalls here
TERMINAL_OR_ACTIVE = ENDED | {"active"}


class ApiError(Exception):
    """The API answered with an error (``status`` >= 400) or could not be reached (status 0)."""

    def __init__(
        self, status: int, error: str, message: str, details: Any = None, retry_after_s: float | None = None
    ) -> None:
        fields = _field_errors(details) if status == 422 else ""
        text = f"{message}: {fields}" if fields else message
        super().__init__(f"{text} ({error})" if error else text)
        self.status, self.error, self.message, self.details = status, error, message, details or {}
        self.retry_after_s = retry_after_s  # the server's Retry-After (seconds form), if it sent one


def _retry_after(value: str | None) -> float | None:
    """Retry-After in seconds; None when absent or not a small number (an HTTP date is ignored)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 3600 else None


def _field_errors(details: Any, prefix: str = "") -> str:
    """{"json": {"dst_port": ["Must be ..."]}} -> "dst_port: Must be ..." (one line for the CLI)."""
    if isinstance(details, dict):
        parts = []
        for key, value in details.items():
            name = "" if key in ("json", "query", "headers") and not prefix else f"{prefix}{key}"
            parts.append(_field_errors(value, f"{name}." if name else ""))
        return "; ".join(p for p in parts if p)
    if isinstance(details, list):
        text = " ".join(str(x) for x in details if not isinstance(x, (dict, list)))
        return f"{prefix.rstrip('.')}: {text}" if prefix and text else text
    return str(details)


def system_ca_bundle() -> str | bool:
    """The operating system's trust store (where a campus adds its CA with update-ca-certificates),
    rather than the bundle shipped with requests; True (that bundle) where the system has none."""
    paths = ssl.get_default_verify_paths()
    return paths.cafile or paths.capath or True


def retry_delay(exc: ApiError, deadline: float) -> float:
    """Seconds to wait before asking again after ``exc``: a 503 with Retry-After, capped by what
    is left until ``deadline`` (monotonic). Re-raises ``exc`` when there is nothing to wait for."""
    left = deadline - time.monotonic()
    if exc.status != 503 or exc.retry_after_s is None or left <= 0:
        raise exc
    return min(max(exc.retry_after_s, 0.1), left)


class ApiClient:
    """``bearer``, when given, is asked for the token before every call: a stored campus login
    (viplanes/client/login.py) refreshes its access token there, silently. It may raise
    :class:`ApiError` (401 ``login_expired``) when the provider refuses the refresh."""

    def __init__(
        self, config: ClientConfig | None = None, timeout_s: float = 30.0, bearer: Callable[[], str] | None = None
    ) -> None:
        self.config = config or ClientConfig.load()
        self.timeout_s = timeout_s
        self.bearer = bearer
        self.session = requests.Session()
        self.session.verify = system_ca_bundle()  # $REQUESTS_CA_BUNDLE still overrides it
        if self.config.token:
            self.session.headers["Authorization"] = f"Bearer {self.config.token}"

    def call(
        self,
        method: str,
        path: str,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        problem = diagnose.url_problem(self.config.api_url)
        if problem:
            raise ApiError(0, "bad_url", problem)
        url = f"{self.config.api_url}/api/v1{path}"
        if self.bearer is not None:
            headers = {**(headers or {}), "Authorization": f"Bearer {self.bearer()}"}
        try:
            r = self.session.request(
                method,
                url,
                json=json,
                timeout=(min(CONNECT_S, self.timeout_s), self.timeout_s),
                headers=headers,
                verify=self.config.ca_file,  # given: it wins over $REQUESTS_CA_BUNDLE too
                params={k: v for k, v in (params or {}).items() if v is not None},
            )
        except requests.exceptions.SSLError as exc:
            raise ApiError(0, *diagnose.tls_failure(self.config.api_url, exc, self.config.ca_file)) from None
        except requests.RequestException as exc:
            raise ApiError(0, *diagnose.unreachable(self.config.api_url, exc)) from None
        if r.status_code >= 400:
            retry = _retry_after(r.headers.get("Retry-After"))
            try:
                body = r.json()
            except ValueError:
                raise ApiError(r.status_code, "", f"HTTP {r.status_code} {r.reason}", None, retry) from None
            raise ApiError(
                r.status_code, body.get("error", ""), body.get("message", r.reason), body.get("details"), retry
            )
        return r.json() if r.content else None

    # --- lanes ---
    def request_lane(
        self,
        body: dict[str, Any],
        idempotency_key: str | None = None,
        retry_for_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> dict[str, Any]:
        """POST /lanes. With ``retry_for_s`` > 0, a 503 carrying Retry-After (switches not ready,
        database away) is asked again after that many seconds, with one Idempotency-Key so a
        retry never makes a second lane, until ``retry_for_s`` in total has passed."""
        key = idempotency_key or (f"wait-{uuid.uuid4()}" if retry_for_s > 0 else None)
        headers = {"Idempotency-Key": key} if key else None
        deadline = time.monotonic() + retry_for_s
        while True:
            try:
                return self.call("POST", "/lanes", json=body, headers=headers)
            except ApiError as exc:
                sleep(retry_delay(exc, deadline))  # re-raises when not to retry

    def lane(self, lane_id: int) -> dict[str, Any]:
        return self.call("GET", f"/lanes/{lane_id}")

    def wait_lane(self, lane: dict[str, Any], timeout_s: float, poll_s: float = 0.25) -> dict[str, Any]:
        """Poll until the lane is active or has ended (a scheduled lane waits for its start)."""
        deadline = time.monotonic() + timeout_s
        while lane["state"] not in TERMINAL_OR_ACTIVE and time.monotonic() < deadline:
            time.sleep(poll_s)
            lane = self.lane(lane["id"])
        return lane


# --- a lane for the length of a block: `with viplanes.client.http.lane(...) as lease:` --------------


class LaneRefused(Exception):
    """The API refused the lane, the lane failed to activate, or the API could not be reached."""

    def __init__(self, message: str, status: int = 0, error: str = "", details: Any = None) -> None:
        super().__init__(message)
        self.status, self.error, self.details = status, error, details if isinstance(details, dict) else {}


class LaneLease:
    """One lane held as a lease: requested for ``lease_s``, extended by ``renew_s`` every
    ``renew_s`` seconds while the holder lives, released at the end.

    The lane's expiry therefore stays between ``lease_s - renew_s`` and ``lease_s`` ahead of now,
    measured by the server's own clock (no client/server clock comparison): a holder that dies
    without releasing leaves the lane at most ``lease_s`` behind it. Once the grant's longest
    duration is reached an extension is refused; the lane then simply ends at its expiry and
    ``warnings`` says so.
    """

    def __init__(
        self,
        api: ApiClient,
        body: dict[str, Any],
        lease_s: int = 60,
        renew_s: int | None = None,
        wait_s: float = 30.0,
        watch_s: float = 2.0,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.api, self.lease_s, self.wait_s = api, lease_s, wait_s
        self.renew_s = renew_s or max(1, lease_s // 3)
        # the lane is read every ``watch_s`` between renewals; ``on_change`` hears each change of
        # state (``interrupted`` with its reason, ``active`` again) from the lease's thread
        self.watch_s = min(watch_s, float(self.renew_s))
        self.on_change = on_change
        self.body = {**body, "duration_s": lease_s}
        self.key = f"lease-{uuid.uuid4()}"  # a retried request returns the same lane
        self.lane: dict[str, Any] | None = None
        self.warnings: list[str] = []
        self.active_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def id(self) -> int | None:
        return self.lane["id"] if self.lane else None

    def start(self, request_guard: Callable[[], AbstractContextManager[Any]] = nullcontext) -> dict[str, Any]:
        """Request and wait until active; LaneRefused otherwise (nothing is left behind).

        ``request_guard`` wraps the request alone: a caller that turns signals into exceptions
        holds them there, so the answer naming the lane is never lost between server and us. An
        exception while waiting (KeyboardInterrupt too) releases the lane before it propagates.
        """
        try:
            deadline = time.monotonic() + self.wait_s  # one budget: Retry-After answers, then activation
            while self.lane is None:
                try:
                    with request_guard():  # the guard holds signals for one request, never a sleep
                        self.lane = self.api.request_lane(self.body, self.key)
                except ApiError as exc:
                    time.sleep(retry_delay(exc, deadline))  # re-raises when not to retry
            lane = self.api.wait_lane(self.lane, max(0.0, deadline - time.monotonic()))
        except ApiError as exc:
            if self.lane is not None:
                self.release()
            raise LaneRefused(str(exc), exc.status, exc.error, exc.details) from None
        except BaseException:
            if self.lane is not None:
                self.release()
            raise
        self.lane = lane
        if lane["state"] != "active":
            self.release()
            raise LaneRefused(f"lane {lane['id']} is {lane['state']}: {lane.get('reason', '')}")
        self.active_at = time.monotonic()
        self._thread = threading.Thread(target=self._renew, name="viplanes-lane-renew", daemon=True)
        self._thread.start()
        return lane

    def _renew(self) -> None:
        """Extend every ``renew_s``; between extensions read the lane every ``watch_s``, so a
        lane that loses its path (or gets it back) is told within ``watch_s``."""
        due = time.monotonic() + self.renew_s
        extending = True
        while not self._stop.wait(max(0.0, min(self.watch_s, due - time.monotonic())) if extending else self.watch_s):
            renew = extending and time.monotonic() >= due
            try:
                if renew:
                    due += self.renew_s
                    lane = self.api.call("POST", f"/lanes/{self.id}/extend", json={"add_s": self.renew_s})
                else:
                    lane = self.api.lane(self.id)  # type: ignore[arg-type]
            except ApiError as exc:
                if exc.status == 0 or not renew:  # API away for a moment: the lease covers it
                    continue
                self.warnings.append(f"lane {self.id} not extended ({exc}); it ends at its expiry")
                extending = False  # keep watching the lane until it ends
                continue
            self._observe(lane)
            if lane["state"] in ENDED:
                return

    def _observe(self, lane: dict[str, Any]) -> None:
        before = self.lane["state"] if self.lane else None
        self.lane = lane
        if lane["state"] != before and self.on_change is not None:
            self.on_change(lane)

    def stats(self) -> dict[str, Any] | None:
        try:
            return self.api.call("GET", f"/lanes/{self.id}/stats")
        except ApiError:
            return None

    def release(self) -> dict[str, Any] | None:
        """Stop renewing and end the lane (a lane that already ended is fine)."""
        self._stop.set()
        thread = self._thread
        # a signal (SIGTERM to `viplanes transfer`) can land while ``start`` waits for the thread to
        # start: not started yet, it cannot be joined, and once it runs it sees the stop at once
        if thread is not None and thread is not threading.current_thread() and thread.ident is not None:
            thread.join(5)
        if self.lane is None or self.lane["state"] in ENDED:
            return self.lane
        try:
            self.lane = self.api.call("POST", f"/lanes/{self.id}/release")
        except ApiError as exc:
            if exc.error != "lane_not_live":
                self.warnings.append(f"lane {self.id} not released ({exc}); it ends at its expiry")
        return self.lane


def lane(api: ApiClient | None = None, *, lease_s: int = 60, wait_s: float = 30.0, **body: Any) -> Any:
    """A context manager holding a lane for the block: ``with lane(src_ip=..., dst_host=...,
    dst_port=443, protocol="tcp", purpose="upload") as lease: ...``. Raises LaneRefused on entry
    when there is no lane; the lane is released on exit, whatever ends the block."""
    from contextlib import contextmanager

    @contextmanager
    def held() -> Any:
        lease = LaneLease(api or ApiClient(), body, lease_s=lease_s, wait_s=wait_s)
        lease.start()
        try:
            yield lease
        finally:
            lease.release()

    return held()
