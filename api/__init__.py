"""api component of VIP Lanes: the Flask app (``viplanes.api.app.create_app``).

Endpoints (all under /api/v1 need ``Authorization: Bearer <token>``; OpenAPI at /api/v1/openapi.json):

    POST /lanes                    request a lane (Idempotency-Key header honoured)
    GET  /lanes                    list (?state=&principal=&src_ip=&dst_ip=&limit=&offset=)
    GET  /lanes/<id>               show          POST /lanes/<id>/extend   {"add_s": N}
    POST /lanes/<id>/release       owner/operator POST /lanes/<id>/revoke  operator
    GET  /lanes/<id>/stats         packets/bytes from the data plane
    POST /grants, GET /grants, GET /grants/<id>, POST /grants/<id>/revoke
    POST /principals, GET /principals, POST /principals/<name>/rotate|disable, GET /whoami
    GET  /audit                    (?actor=&action=&decision=&target=&since=&until=)
    GET  /readiness                the whole readiness report (operator; /readyz: counts only)
    GET  /healthz, /readyz, /metrics (no token)

Errors are ``{"error": code, "message": text, "details": {...}}``.

Modules: ``app``, ``audit``, ``auth``, ``automation``, ``bodies``, ``context``, ``errors``,
``grants``, ``health``, ``lanes``, ``metrics``, ``oidc``, ``principals``, ``requestid``,
``schemas``, ``values``, ``views``.

Subpackages: ``ui``.

Imports today: authz, auto, config, controller, dataplane, domain, errors, lanes, logs, policy, store,
topologies. Never (.importlinter): click, tests, cli.
"""
