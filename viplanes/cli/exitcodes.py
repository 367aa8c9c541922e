"""The exit codes of the API commands (`principal`, `grant`, `lane`, `audit`), in one table.

Why distinct: a script must tell "try again later" (the API is unreachable) from "fix your
set-up" (no token, a broken client config file) without parsing the message. The table is
printed in docs/operating.md and checked against it by a test.
"""

from __future__ import annotations

OK = 0  # done (a lane: active or scheduled)
REFUSED = 1  # the API answered with an error, or the lane failed or ended
USAGE = 2  # a bad option or argument (click's own code)
UNREACHABLE = 3  # the API could not be reached (connection refused, timeout)
NO_TOKEN = 4  # no token configured (VIPLANES_TOKEN, --token or the config file)
BAD_CONFIG = 5  # the client config file cannot be used (unknown key, wrong type, unreadable)
LOGIN = 6  # the campus login (`viplanes login`) failed, expired or was refused: sign in again
TLS_VERIFY = 76  # the API's certificate did not verify: a trust problem, not "unreachable"

TABLE: dict[int, str] = {
    OK: "done (a lane: active or scheduled)",
    REFUSED: "the API refused (the error is printed), or the lane failed or ended",
    USAGE: "a bad option or argument",
    UNREACHABLE: "the API could not be reached",
    NO_TOKEN: "no token: run `viplanes login`, or set VIPLANES_TOKEN, --token or token in the config file",
    BAD_CONFIG: "the client config file cannot be used (the key is named)",
    LOGIN: "the campus login failed, expired or was refused: run `viplanes login` again",
    TLS_VERIFY: "the API's certificate did not verify: give its CA with --ca-file or [client] ca_file",
}
