"""What a failed switch TLS handshake means and how to fix it, in one line an operator can act on.

Why: a switch whose vswitchd trusts another CA never connects, and the only trace is an OpenSSL
reason (``TLSV1_ALERT_UNKNOWN_CA``) in the listener's log; `serve` and `lab shell` name the cause
and the fix from it. Pure: reasons in, text out.
"""

from __future__ import annotations

import re

LAB_FIX = "for the lab's switches: viplanes serve ... $(.venv/bin/python -m viplanes.lab.labpki)"

# OpenSSL reason (as the listener logs it) -> (cause, fix)
CAUSES: dict[str, tuple[str, str]] = {
    "TLSV1_ALERT_UNKNOWN_CA": (
        "the switch does not trust the controller's certificate (its vswitchd's CA file is another CA)",
        "give the switch host this PKI's ca.crt (`ovs-vsctl get-ssl` shows which it uses), or start "
        f"the controller with the PKI the switches trust ({LAB_FIX})",
    ),
    "CERTIFICATE_VERIFY_FAILED": (
        "the switch's certificate is not signed by the campus CA given to --pki",
        f"issue it with `viplanes pki switch --dir PKI ...`, or use the PKI that signed it ({LAB_FIX})",
    ),
    "TLSV1_ALERT_BAD_CERTIFICATE": (
        "the switch refused the controller's certificate",
        f"check the controller certificate in --pki is signed by the CA the switch trusts ({LAB_FIX})",
    ),
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": (
        "the switch sent no certificate (its vswitchd has no SSL config)",
        "ovs-vsctl get-ssl; when empty: ovs-vsctl set-ssl KEY CERT CA (see `viplanes pki switch`)",
    ),
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": (
        "the switch sent no certificate (its vswitchd has no SSL config)",
        "ovs-vsctl get-ssl; when empty: ovs-vsctl set-ssl KEY CERT CA (see `viplanes pki switch`)",
    ),
    "WRONG_VERSION_NUMBER": (
        "the switch speaks plain TCP to a TLS listener",
        "ovs-vsctl set-controller BRIDGE ssl:HOST:PORT (not tcp:)",
    ),
}

_REASON = re.compile(r"TLS handshake failed: \[?([A-Z0-9_]+)")


def explain(reason: str) -> str | None:
    """'cause; fix: ...' for an OpenSSL reason (or a text containing one); None when unknown."""
    for key, (cause, fix) in CAUSES.items():
        if key in reason:
            return f"{cause}; fix: {fix}"
    return None


def reasons_in_log(text: str) -> list[str]:
    """The distinct TLS handshake failure reasons the listener logged, in first-seen order."""
    seen: dict[str, None] = {}
    for m in _REASON.finditer(text):
        seen.setdefault(m.group(1), None)
    return list(seen)


def diagnose_log(text: str) -> list[str]:
    """One 'REASON: cause; fix: ...' line per distinct known failure found in a listener log."""
    out = []
    for reason in reasons_in_log(text):
        why = explain(reason)
        if why:
            out.append(f"{reason}: {why}")
    return out
