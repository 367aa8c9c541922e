"""``viplanes api --db postgresql://... --workers N``: the Flask app in N processes on one port.

Why several processes of our own with SO_REUSEPORT rather than gunicorn: each runs the server
``serve`` runs (viplanes/cli/apiserver.py, cheroot: same TLS, limits and graceful stop), and
SO_REUSEPORT makes the kernel spread new connections over the N listening sockets, so there is no
accept lock and no master in the data path. The parent only forks the workers and starts a new one when one dies
(a kill -9 under load loses that worker's in-flight requests, never a committed lane: the lane
rows and the hand-off are in the database).

The data plane of every worker is ``dataplane.remote.RemoteDataplane``: the controllers are other
processes (``viplanes controller cluster``), reached through the database.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import ssl
import sys
import time
from typing import Any

import click

from viplanes.cli import exitcodes
from viplanes.cli.apiserver import ServerLimits, create_api_server
from viplanes.cli.clockopt import max_clock_skew_option, refuse_skewed_clock
from viplanes.cli.https import api_tls_options, listen_tls
from viplanes.cli.logopts import configure, log_options
from viplanes.cli.options import hostport_option
from viplanes.lifecycle import die_with_parent

log = logging.getLogger("viplanes.cli.api")


def _reuseport_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(1024)
    return sock


def worker_app(db_url: str, topology_path: str | None) -> Any:
    """One API process's app, with the heap it took to build it frozen.

    Why freeze: the app and every module it imported are ~135,000 objects the cyclic collector
    tracks, and a full collection walks them all: 60-86 ms inside whichever request triggers it,
    the first one within a worker's first few thousand requests (``bench.probes.worker_gc``;
    docs/benchmarks.md, "The API workers' startup heap"). ``gc.freeze()`` exempts them from
    later collections; reference counting still frees them."""
    from viplanes.cli import services
    from viplanes.cli.serve import load_topology_option
    from viplanes.dataplane.remote import RemoteDataplane
    from viplanes.store.db import Database

    ps = services.load(db_url, api=True, migrate=False)
    topology = load_topology_option(topology_path)
    plane = RemoteDataplane(Database(db_url, pool_size=2))
    app = services.app(ps, plane, topology)
    gc.collect()
    gc.freeze()
    return app


def _preload() -> None:
    """Import what every worker's app needs once, before the fork: the workers share those pages
    instead of each spending ~2.4 s of CPU importing them (13 s to listen at load 8)."""
    import viplanes.api.app
    import viplanes.dataplane.remote  # noqa: F401


def _worker(
    db_url: str, host: str, port: int, threads: int, topology_path: str | None, tls: ssl.SSLContext | None = None
) -> None:
    """One API process: its own engine (never shared across fork), its own listening socket.
    SIGTERM ends ``run()`` gracefully: in-flight requests finish (``ServerLimits.shutdown_s``)."""
    signal.signal(signal.SIGTERM, lambda signum, _f: sys.exit(128 + signum))
    app = worker_app(db_url, topology_path)
    server = create_api_server(app, host, port, tls, ServerLimits(threads=threads), reuse_port=True)
    try:
        server.run()
    except (KeyboardInterrupt, SystemExit):
        pass


@click.command("api")
@click.option(
    "--db",
    "db_url",
    envvar="VIPLANES_DB_URL",
    default=None,
    help="shared database URL (postgresql://...), the one the controllers use "
    "[default: $VIPLANES_DB_URL, else [db] url of the config file]",
)
@click.option("--listen", "listen", default="127.0.0.1:8080", show_default=True, help="HOST:PORT")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="API processes sharing the port (SO_REUSEPORT)",
)
@click.option("--threads", type=click.IntRange(1, 256), default=8, show_default=True, help="threads per process")
@click.option(
    "--topology",
    "topology_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="topology YAML; required when a config file is in effect (default without one: the bundled lab campus)",
)
@max_clock_skew_option
@api_tls_options
@log_options
def api(
    db_url: str | None,
    listen: str,
    workers: int,
    threads: int,
    topology_path: str | None,
    max_skew_s: float,
    log_format: str,
    log_level: str,
) -> None:
    """The API alone, in N processes; lanes are installed by `viplanes controller cluster`."""
    if not db_url:
        click.echo(
            "error: viplanes api needs the shared database: give --db postgresql://..., set VIPLANES_DB_URL, "
            "or url in the [db] table of the config file (docs/configuration.md)",
            err=True,
        )
        sys.exit(exitcodes.USAGE)
    from sqlalchemy.exc import SQLAlchemyError

    from viplanes.cli import services
    from viplanes.cli.serve import load_topology_option
    from viplanes.store.db import Database

    configure(log_format, log_level)  # before the fork: every worker inherits the handler
    host, port = hostport_option(listen, "--listen")
    tls = listen_tls(host, "--listen")
    load_topology_option(topology_path, "api")  # a bad file is one line here, not N worker tracebacks
    if topology_path is None:  # allowed only without a config file: the workers load the same, quietly
        from viplanes.cli.campusfile import bundled_campus

        topology_path = bundled_campus()
    services.load(db_url, api=True)  # the workers read the same settings: refuse a bad value once, here
    try:
        db = Database(db_url, pool_size=1)
        db.create_all()  # migrate once, before the workers race for it
        refuse_skewed_clock(db, max_skew_s)  # lane windows are written on this clock
        db.dispose()
    except SQLAlchemyError as exc:
        raise click.ClickException(f"database: {str(exc).splitlines()[0]}") from None
    try:
        _reuseport_socket(host, port).close()  # the port is ours to share, or say why not now
    except OSError as exc:
        raise click.ClickException(f"--listen {listen}: {exc.strerror or exc}") from None
    click.echo(
        f"viplanes api: {'https' if tls else 'http'}://{host}:{port}  {workers} processes x {threads} threads  db {db.display_url}",
        err=True,
    )
    sys.stderr.flush()
    children: dict[int, int] = {}
    stopping = False

    parent = os.getpid()
    _preload()

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:
            try:
                die_with_parent(parent, signal.SIGTERM)()  # a SIGKILLed parent leaves no worker on the port
                _worker(db_url, host, port, threads, topology_path, tls)
            finally:
                os._exit(0)
        children[pid] = slot

    def stop(*_: Any) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in range(workers):
        spawn(slot)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        ended = children.pop(pid)
        if not stopping:
            click.echo(f"viplanes api: worker {pid} ended ({status:#x}); starting another", err=True)
            time.sleep(0.2)
            spawn(ended)
