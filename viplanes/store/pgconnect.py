"""How every PostgreSQL connection of ours is opened: libpq reads the URL, and each one carries
TCP keepalives and statement/lock timeouts (issue 28, items 5 and 6).

libpq, not SQLAlchemy, parses the URL. SQLAlchemy's URL parser refuses what a fail-over needs:
a multi-host URL (``postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write``) fails
on its port, and a ``host=a,b&port=p1,p2`` query opened the pool but not the LISTEN connections
that rebuilt a URL from SQLAlchemy's parse. So the pool's ``creator``, the LISTEN/NOTIFY
connections (``viplanes.cluster.handoff``) and the migrations (on the pool's engine) all call
``connect`` with the very string the operator gave; a percent-encoded password stays encoded
until libpq decodes it.

Without a deadline of its own a connection whose packets are dropped waits forever (a master
cut off from the database hung in its lease query until the partition healed). Each connection
gets, unless the URL sets the same key itself:

- ``keepalives`` after ``KEEPALIVE_IDLE_S`` of silence, every ``KEEPALIVE_INTERVAL_S``, dead after
  ``KEEPALIVE_COUNT`` unanswered: a connection waiting for an answer learns the peer is gone in
  about 11 s;
- ``tcp_user_timeout`` (``TCP_USER_TIMEOUT_S``): data the server has not acknowledged for that long
  ends the connection (keepalives do not cover a connection with unacknowledged data);
- ``connect_timeout`` (``CONNECT_TIMEOUT_S``): per host of a multi-host URL, so the next is tried;
- ``statement_timeout`` and ``lock_timeout`` in the session (``options``), so no statement waits on
  a lock or runs without bound; the lease sets tighter ones in its own transactions.

None of these bounds the wait of a statement whose packets are swallowed by a peer that still
acknowledges them (a frozen proxy): that is why the lease deadline is kept by a thread that never
touches the database (``viplanes.cluster.leader``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from viplanes.domain.urls import redact_url

CONNECT_TIMEOUT_S = 5
KEEPALIVE_IDLE_S = 5
KEEPALIVE_INTERVAL_S = 2
KEEPALIVE_COUNT = 3
TCP_USER_TIMEOUT_S = 10.0
STATEMENT_TIMEOUT_S = 30.0  # far above any statement of ours; the migrations set their own
LOCK_TIMEOUT_S = 10.0  # as long as a transaction may sit idle (``db.IDLE_IN_TRANSACTION_S``)


@dataclass(frozen=True)
class PgSettings:
    """The per-connection bounds; the defaults are the module constants."""

    idle_in_transaction_s: float = 10.0
    statement_timeout_s: float = STATEMENT_TIMEOUT_S
    lock_timeout_s: float = LOCK_TIMEOUT_S
    connect_timeout_s: int = CONNECT_TIMEOUT_S
    tcp_user_timeout_s: float = TCP_USER_TIMEOUT_S


def libpq_url(url: str) -> str:
    """The URL as libpq takes it: SQLAlchemy's ``+psycopg2`` driver suffix removed."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme.split('+', 1)[0]}{sep}{rest}" if sep else url


def redact(url: str) -> str:
    """The URL for logs: every password replaced by ``***`` (userinfo, multi-host, ``?password=``)."""
    return redact_url(url)


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def connect_kwargs(url: str, settings: PgSettings) -> dict[str, Any]:
    """libpq keywords added to ``url``: ours where the URL does not set the same key. The
    session settings go before any ``options`` of the URL's own, so the URL's win."""
    from psycopg2.extensions import parse_dsn

    given = parse_dsn(libpq_url(url))
    ours: dict[str, Any] = {
        "connect_timeout": str(settings.connect_timeout_s),
        "keepalives": "1",
        "keepalives_idle": str(KEEPALIVE_IDLE_S),
        "keepalives_interval": str(KEEPALIVE_INTERVAL_S),
        "keepalives_count": str(KEEPALIVE_COUNT),
        "tcp_user_timeout": str(_ms(settings.tcp_user_timeout_s)),
    }
    out = {k: v for k, v in ours.items() if k not in given}
    session = (
        f"-c idle_in_transaction_session_timeout={_ms(settings.idle_in_transaction_s)} "
        f"-c statement_timeout={_ms(settings.statement_timeout_s)} -c lock_timeout={_ms(settings.lock_timeout_s)}"
    )
    out["options"] = f"{session} {given['options']}" if given.get("options") else session
    return out


def connect(url: str, settings: PgSettings) -> Any:
    """A psycopg2 connection to ``url`` (any form libpq accepts) with our bounds."""
    import psycopg2

    return psycopg2.connect(libpq_url(url), **connect_kwargs(url, settings))
