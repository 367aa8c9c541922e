"""The app's OpenFlow cookie range: which flows are ours, which lane a flow belongs to.

Layout of the 64-bit cookie::

    63..48  0x5650 ("VP")  the app tag; flows without it are someone else's and never touched
    47      1 = base flow (table-miss, bypass drop, ARP punt), 0 = lane flow
    46..0   the lane id (lane flows only)

So one (cookie, cookie_mask) pair addresses "all app flows", "all lane flows" or "one lane".
"""
from __future__ import annotations

APP_COOKIE = 0x5650 << 48
APP_COOKIE_MASK = 0xFFFF << 48
BASE_FLAG = 1 << 47
BASE_COOKIE = APP_COOKIE | BASE_FLAG
LANE_ID_BITS = 47
LANE_ID_MAX = (1 << LANE_ID_BITS) - 1
# (cookie, mask) pairs for flow-stats requests and deletes
ALL_APP_FLOWS = (APP_COOKIE, APP_COOKIE_MASK)
ALL_LANE_FLOWS = (APP_COOKIE, APP_COOKIE_MASK | BASE_FLAG)
BASE_FLOWS = (BASE_COOKIE, APP_COOKIE_MASK | BASE_FLAG)
EXACT_MASK = 2**64 - 1


def lane_cookie(lane_id: int) -> int:
    """The cookie every flow of lane ``lane_id`` carries."""
    if isinstance(lane_id, bool) or not isinstance(lane_id, int) or not 1 <= lane_id <= LANE_ID_MAX:
        raise ValueError(f"lane id must be an integer 1..{LANE_ID_MAX}, got {lane_id!r}")
    return APP_COOKIE | lane_id


def lane_id_from_cookie(cookie: int) -> int | None:
    """The lane a flow belongs to, or None for base flows and flows that are not the app's."""
    if cookie & APP_COOKIE_MASK != APP_COOKIE or cookie & BASE_FLAG:
        return None
    lane_id = cookie & LANE_ID_MAX
    return lane_id or None


def is_app_cookie(cookie: int) -> bool:
    return cookie & APP_COOKIE_MASK == APP_COOKIE
