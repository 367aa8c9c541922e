"""The app's OpenFlow cookie range: which flows are ours, which lane a flow belongs to.

Layout of the 64-bit cookie::

    63..48  0x5650 ("VP")  the app tag; flows without it are someone else's and never touched
    47      1 = base flow (table-miss, bypass drop, guards, ARP punt, conntrack plumbing)
    46      1 = shared per-address flow (bit 47 clear): belongs to a lane-pool or host address
            that several lanes may use at once (switch-side ARP reply, stateless ICMP pass,
            ICMP-error transit); installed with the first live lane using the address, deleted
            with the last
    45..0   the lane id (lane flows), or the IPv4 address as a 32-bit int (shared flows)

So one (cookie, cookie_mask) pair addresses "all app flows", "all lane flows", "all shared
flows", "one lane" or "one address". ``lane_id_from_cookie`` is None for base and shared flows.
"""

from __future__ import annotations

import ipaddress

APP_COOKIE = 0x5650 << 48
APP_COOKIE_MASK = 0xFFFF << 48
BASE_FLAG = 1 << 47
SHARED_FLAG = 1 << 46
BASE_COOKIE = APP_COOKIE | BASE_FLAG
LANE_ID_BITS = 46
LANE_ID_MAX = (1 << LANE_ID_BITS) - 1
# (cookie, mask) pairs for flow-stats requests and deletes
ALL_APP_FLOWS = (APP_COOKIE, APP_COOKIE_MASK)
ALL_LANE_FLOWS = (APP_COOKIE, APP_COOKIE_MASK | BASE_FLAG | SHARED_FLAG)
ALL_SHARED_FLOWS = (APP_COOKIE | SHARED_FLAG, APP_COOKIE_MASK | BASE_FLAG | SHARED_FLAG)
BASE_FLOWS = (BASE_COOKIE, APP_COOKIE_MASK | BASE_FLAG)
EXACT_MASK = 2**64 - 1


def lane_cookie(lane_id: int) -> int:
    """The cookie every flow of lane ``lane_id`` carries."""
    if isinstance(lane_id, bool) or not isinstance(lane_id, int) or not 1 <= lane_id <= LANE_ID_MAX:
        raise ValueError(f"lane id must be an integer 1..{LANE_ID_MAX}, got {lane_id!r}")
    return APP_COOKIE | lane_id


def shared_cookie(address: str | ipaddress.IPv4Address) -> int:
    """The cookie of the flows shared by every lane using ``address``."""
    return APP_COOKIE | SHARED_FLAG | int(ipaddress.IPv4Address(address))


def address_from_cookie(cookie: int) -> str | None:
    """The address a shared flow belongs to; None for any other cookie."""
    if cookie & APP_COOKIE_MASK != APP_COOKIE or cookie & (BASE_FLAG | SHARED_FLAG) != SHARED_FLAG:
        return None
    return str(ipaddress.IPv4Address(cookie & 0xFFFFFFFF))


def lane_id_from_cookie(cookie: int) -> int | None:
    """The lane a flow belongs to; None for base/shared flows and flows that are not the app's."""
    if cookie & APP_COOKIE_MASK != APP_COOKIE or cookie & (BASE_FLAG | SHARED_FLAG):
        return None
    lane_id = cookie & LANE_ID_MAX
    return lane_id or None


def is_app_cookie(cookie: int) -> bool:
    return cookie & APP_COOKIE_MASK == APP_COOKIE
