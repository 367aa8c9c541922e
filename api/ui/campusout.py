"""Sign-out for a person the campus provider signed in but VIP Lanes refused (``no_role``, ...).

They have no console session, so ``/ui/logout`` (behind the sign-in gate) is not theirs. Without
this, "Sign in with <campus>" would go straight back to the refusal: the provider's session
persists and signs the same account in again. ``/ui/logout/campus`` ends that session by
RP-initiated logout (the provider's ``end_session_endpoint`` with ``id_token_hint`` and
``post_logout_redirect_uri``) and marks the browser so that its next sign-in asks the provider
for a fresh login (``prompt=login``), where another account can be chosen. The form carries the
sign-in page's CSRF secret (``vl_presign``), set by the refusal page.
"""

from __future__ import annotations

from flask import make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from .campus import FRESH_LOGIN_COOKIE, _post_logout_uri
from .campusfresh import IDT_COOKIE, RT_COOKIE
from .session import COOKIE, PRE_COOKIE, same_secret
from .web import CsrfRefused, bp, cookie_args, error_page, ui_state

FRESH_LOGIN_S = 600  # the next sign-in within 10 minutes asks for a fresh login


@bp.route("/logout/campus", methods=["POST"], endpoint="campus_sign_out")
def campus_sign_out() -> ResponseReturnValue:
    if not same_secret(request.form.get("csrf"), request.cookies.get(PRE_COOKIE, "")):
        raise CsrfRefused()
    campus = ui_state().campus
    if campus is None:
        return error_page(404, "campus_sign_in_off", "Sign-in at the campus provider is not configured here.")
    target = campus.end_session_url(request.cookies.get(IDT_COOKIE), _post_logout_uri(campus))
    if target is None:  # the provider offers no sign-out: prompt=login still lets them choose
        resp = redirect(url_for("ui.sign_in"))
    else:  # a page, not a redirect: CSP form-action 'self' forbids a form's redirect to the provider
        resp = make_response(render_template("ui/signing_out.html", target=target, campus=campus.display_name))
    resp.set_cookie(FRESH_LOGIN_COOKIE, "1", **cookie_args(FRESH_LOGIN_S))
    for name in (COOKIE, IDT_COOKIE, RT_COOKIE, PRE_COOKIE):
        resp.delete_cookie(name, path="/ui")
    return resp
