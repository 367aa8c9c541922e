"""A small HTTP client of the VIP Lanes API, used by the CLI, the lab and the benchmarks."""
from __future__ import annotations

import time
from typing import Any

import requests

from viplanes.config import ClientConfig

TERMINAL_OR_ACTIVE = {"active", "failed", "expired", "released", "revoked"}


class ApiError(Exception):
    """The API answered with an error (``status`` >= 400) or could not be reached (status 0)."""

    def __init__(self, status: int, error: str, message: str, details: Any = None) -> None:
        fields = _field_errors(details) if status == 422 else ""
        text = f"{message}: {fields}" if fields else message
        super().__init__(f"{text} ({error})" if error else text)
        self.status, self.error, self.message, self.details = status, error, message, details or {}


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


class ApiClient:
    def __init__(self, config: ClientConfig | None = None, timeout_s: float = 30.0) -> None:
        self.config = config or ClientConfig.load()
        self.timeout_s = timeout_s
        self.session = requests.Session()
        if self.config.token:
            self.session.headers["Authorization"] = f"Bearer {self.config.token}"

    def call(self, method: str, path: str, json: Any = None, params: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> Any:
        url = f"{self.config.api_url}/api/v1{path}"
        try:
            r = self.session.request(method, url, json=json, timeout=self.timeout_s, headers=headers,
                                     params={k: v for k, v in (params or {}).items() if v is not None})
        except requests.RequestException as exc:
            raise ApiError(0, "unreachable", f"cannot reach {self.config.api_url}: {exc.__class__.__name__}") from None
        if r.status_code >= 400:
            try:
                body = r.json()
                raise ApiError(r.status_code, body.get("error", ""), body.get("message", r.reason), body.get("details"))
            except ValueError:
                raise ApiError(r.status_code, "", f"HTTP {r.status_code} {r.reason}") from None
        return r.json() if r.content else None

    # --- lanes ---
    def request_lane(self, body: dict[str, Any], idempotency_key: str | None = None) -> dict[str, Any]:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self.call("POST", "/lanes", json=body, headers=headers)  # type: ignore[no-any-return]

    def lane(self, lane_id: int) -> dict[str, Any]:
        return self.call("GET", f"/lanes/{lane_id}")  # type: ignore[no-any-return]

    def wait_lane(self, lane: dict[str, Any], timeout_s: float, poll_s: float = 0.25) -> dict[str, Any]:
        """Poll until the lane is active or has ended (a scheduled lane waits for its start)."""
        deadline = time.monotonic() + timeout_s
        while lane["state"] not in TERMINAL_OR_ACTIVE and time.monotonic() < deadline:
            time.sleep(poll_s)
            lane = self.lane(lane["id"])
        return lane
