"""Start os-ken 1.4.1's ``ofctl_rest`` (the Ryu REST app) on today's eventlet, for the peers benchmark.

os-ken 1.4.1 is the last os-ken that ships ``os_ken/app/ofctl_rest.py`` (3.x dropped the REST
apps). Its ``app/wsgi.py`` imports ``eventlet.wsgi.ALREADY_HANDLED``, a sentinel that eventlet
removed after 0.30.2 (and 0.30.2 itself does not import on Python 3.11). os-ken returns that
sentinel only from websocket handlers, which ``ofctl_rest`` does not use, so defining it when it
is missing changes nothing the benchmark exercises. Second: its OpenFlow TLS listener hard-codes
``ssl.PROTOCOL_TLSv1``, which OpenSSL 3 on Debian 12 refuses ("no ciphers available"), so no
switch could connect over TLS at all; the launcher lets that name mean "TLS, server side"
(TLS 1.2/1.3 negotiated, the same as our controller and Faucet get). Nothing else of the peer is
touched: certificate checks (CERT_REQUIRED against the lab CA) stay as os-ken sets them.

Run with the peer venv's python: ``python ofctl_rest_launch.py [osken-manager args]``;
``--import-check`` only imports the app (exit 0 when it is usable).
"""

import ssl
import sys

import eventlet.wsgi

if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):
    eventlet.wsgi.ALREADY_HANDLED = object()
ssl.PROTOCOL_TLSv1 = ssl.PROTOCOL_TLS_SERVER  # read by os_ken.controller.controller at listen time

if __name__ == "__main__":
    if sys.argv[1:] == ["--import-check"]:
        import os_ken.app.ofctl_rest  # noqa: F401

        sys.exit(0)
    from os_ken.cmd.manager import main

    sys.exit(main())
