"""The API's WSGI server: cheroot, speaking HTTPS itself or plain HTTP on loopback.

Why cheroot: it terminates TLS with the ``ssl`` module (no proxy in front, so the failed-login
budgets of viplanes/store/ratelimit.py still see each client's address), keeps idle keep-alive
connections in one selector rather than one thread each, and runs in a thread of any process:
``viplanes serve`` holds os-ken, the lane service and the API in one process, which a pre-fork
server (gunicorn) cannot host. ``viplanes api --workers N`` runs one cheroot per process on a
port they share with SO_REUSEPORT. The measurement behind the choice is in docs/benchmarks.md
("The API server").

Two changes to cheroot's defaults, both for clients that connect and say nothing: the TLS
handshake runs in a worker thread with the connection timeout, never on the accepting thread
(cheroot's builtin adapter handshakes while accepting, so one silent client would stop every
accept), and a new connection waits in the selector until it sends its first byte, so a silent
one costs a file descriptor until ``timeout_s``, never a worker thread.

And one to its stop: a keep-alive connection a worker thread waits on for its next request line
(bytes left after a chunked body send it back to a worker, not to the selector) is closed at once
on ``stop()``; cheroot waited the whole ``shutdown_s`` for that worker. A request whose line has
arrived finishes as before.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import ssl
import threading
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from cheroot.errors import MaxSizeExceeded
from cheroot.server import HTTPConnection, HTTPRequest
from cheroot.ssl.builtin import BuiltinSSLAdapter
from cheroot.wsgi import Server

log = logging.getLogger("viplanes.cli.apiserver")


@dataclass(frozen=True)
class ServerLimits:
    """What one API process holds at most, and how long it waits for a client."""

    threads: int = 8  # requests served at once
    max_connections: int = 1000  # idle keep-alive connections plus new ones not yet speaking
    queue: int = 256  # connections with a request waiting for a thread; beyond it: 503 at once
    max_body_bytes: int = 1024 * 1024  # the app answers 413 in JSON above 64 KiB; this is the backstop
    max_header_bytes: int = 64 * 1024
    timeout_s: int = 10  # the TLS handshake, a request's headers and body, an idle keep-alive
    shutdown_s: int = 10  # on SIGTERM: in-flight requests get this long to finish
    backlog: int = 1024


class _Request(HTTPRequest):
    """A request that tells its connection once its request line has been read."""

    def read_request_line(self) -> bool:
        try:
            return bool(super().read_request_line())
        finally:
            self.conn.awaiting_request = False


class _Connection(HTTPConnection):
    """A connection whose TLS handshake, if any, happens on the worker thread that serves it."""

    RequestHandlerClass = _Request
    fresh = True  # not yet seen by the selector: it has sent nothing
    handshaken = False
    awaiting_request = False  # a worker waits for its request line: idle, closed at once by stop()

    def communicate(self) -> bool:
        sock = self.socket
        if isinstance(sock, ssl.SSLSocket) and not self.handshaken:
            try:
                sock.do_handshake()  # blocking, bounded by the connection's timeout
            except (ssl.SSLError, OSError) as exc:  # a timeout is an OSError too
                log.info("TLS handshake from %s failed: %s", self.remote_addr, exc)
                return False  # the worker closes it
            self.handshaken = True
        server: _Server = self.server
        if not server.hold(self):
            return False  # the server is stopping: no new request starts
        try:
            return bool(super().communicate())
        finally:
            server.release(self)


class _LazyTLSAdapter(BuiltinSSLAdapter):
    """cheroot's adapter on our context, wrapping without the handshake (``_Connection`` does it)."""

    def __init__(self, context: ssl.SSLContext) -> None:  # not the base: it would load the files again
        self._context = context
        self.certificate = self.private_key = self.certificate_chain = self.ciphers = None

    def wrap(self, sock: Any) -> tuple[ssl.SSLSocket, dict[str, str]]:
        wrapped = self._context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return wrapped, {"wsgi.url_scheme": "https", "HTTPS": "on"}


class _Server(Server):
    ConnectionClass = _Connection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: set[_Connection] = set()  # connections a worker thread serves now
        self._held_lock = threading.Lock()
        self._stopping = False

    def hold(self, conn: _Connection) -> bool:
        """A worker takes ``conn`` for its next request; False once ``stop()`` began."""
        with self._held_lock:
            if self._stopping:
                return False
            conn.awaiting_request = True
            self._held.add(conn)
            return True

    def release(self, conn: _Connection) -> None:
        with self._held_lock:
            conn.awaiting_request = False
            self._held.discard(conn)

    def stop(self) -> None:
        """cheroot's stop, after closing the connections whose worker waits for a request line:
        reading one returns at once, so stop no longer waits ``shutdown_s`` for an idle client."""
        with self._held_lock:
            self._stopping = True
            idle = [conn for conn in self._held if conn.awaiting_request]
        for conn in idle:
            with suppress(OSError):
                conn.socket.shutdown(socket.SHUT_RDWR)
        super().stop()

    def process_conn(self, conn: _Connection) -> None:
        """A new connection waits in the selector for its first byte, unless the server is full."""
        if conn.fresh:
            conn.fresh = False
            if not self.can_add_keepalive_connection:
                log.warning(
                    "API connection from %s refused: %d connections open", conn.remote_addr, self.keep_alive_conn_limit
                )
                conn.close()
                return
            self.put_conn(conn)
            return
        super().process_conn(conn)

    def error_log(self, msg: str = "", level: int = logging.INFO, traceback: bool = False) -> None:
        log.log(level, "%s", msg, exc_info=traceback)


class ApiServer:
    """One listening API server: ``run()`` serves until a signal ends it, then stops gracefully."""

    def __init__(self, server: _Server) -> None:
        self._server = server

    @property
    def port(self) -> int:
        return int(self._server.bind_addr[1])

    def run(self) -> None:
        """Serve in this thread; SIGTERM's SystemExit or SIGINT ends it after ``stop()``."""
        try:
            self._server.serve()
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop accepting, close idle connections, let in-flight requests finish (bounded)."""
        self._server.stop()


# cheroot's own count on a chunked body is of the bytes on the wire, chunk-size lines included,
# so at our limit it refused bodies under it (64 chunks of 4 KiB carry 384 bytes of framing). It
# stays as the backstop against framing that never ends, at twice the limit plus this.
WIRE_SLACK = 64 * 1024


def wire_budget(limit: int) -> int:
    """What cheroot may read for one request body, framing included (its ``max_request_body_size``)."""
    return 2 * limit + WIRE_SLACK


def read_at_most(stream: Any, limit: int, piece: int = 64 * 1024) -> bytes | None:
    """The whole body, or None as soon as it is over ``limit`` bytes (counted here, never
    read further than ``limit + 1``)."""
    parts: list[bytes] = []
    got = 0
    while got <= limit:
        data = stream.read(min(piece, limit + 1 - got))
        if not data:
            return b"".join(parts)
        parts.append(data)
        got += len(data)
    return None


def _over_wire_budget(exc: Exception) -> bool:
    """cheroot refused to read more of a chunked body: ``MaxSizeExceeded`` for a long chunk-size
    line, a bare ``OSError`` for a chunk that would pass its budget. A failing socket raises the
    subclasses (``ConnectionError``, ``TimeoutError``, ``ssl.SSLError``)."""
    return isinstance(exc, MaxSizeExceeded) or type(exc) is OSError


def dechunked(app: Any, limit: int) -> Any:
    """The app, given a body over ``limit`` bytes answered 413 in JSON, and a chunked body read
    whole with its length set, as waitress did. cheroot streams a chunked body with no
    Content-Length, and werkzeug then cuts it at MAX_CONTENT_LENGTH instead of answering 413: an
    oversized body read as bad JSON."""

    def too_large(start_response: Any) -> list[bytes]:
        start_response("413 Content Too Large", [("Content-Type", "application/json"), ("Connection", "close")])
        problem = {"error": "too_large", "message": f"the request body is over {limit} bytes"}
        return [json.dumps(problem).encode()]

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        length = environ.get("CONTENT_LENGTH")
        if length and length.isdigit() and int(length) > limit:
            return too_large(start_response)
        if environ.get("wsgi.input_terminated") and not length:
            try:
                body = read_at_most(environ["wsgi.input"], limit)
            except (MaxSizeExceeded, OSError) as exc:
                if not _over_wire_budget(exc):
                    raise  # the connection itself failed
                body = None
            if body is None:
                return too_large(start_response)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            # a known length now, and no longer chunked: werkzeug then checks the length
            del environ["wsgi.input_terminated"]
            environ.pop("HTTP_TRANSFER_ENCODING", None)
        return app(environ, start_response)

    return wrapped


def create_api_server(
    app: Any,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    limits: ServerLimits = ServerLimits(),
    reuse_port: bool = False,
) -> ApiServer:
    """Bind ``host:port`` (OSError when it cannot) and return the server, not yet serving."""
    server = _Server(
        (host, port),
        dechunked(app, limits.max_body_bytes),
        numthreads=limits.threads,
        max=limits.threads,
        server_name="viplanes",
        request_queue_size=limits.backlog,
        timeout=limits.timeout_s,
        shutdown_timeout=limits.shutdown_s,
        accepted_queue_size=limits.queue,
        accepted_queue_timeout=0,
        reuse_port=reuse_port,
    )
    server.keep_alive_conn_limit = limits.max_connections
    server.max_request_body_size = wire_budget(limits.max_body_bytes)  # dechunked counts the body
    server.max_request_header_size = limits.max_header_bytes
    if tls is not None:
        server.ssl_adapter = _LazyTLSAdapter(tls)
    server.prepare()
    return ApiServer(server)
