"""Who may do what: API token format and hashing, the verified-token cache. Pure; imports nothing
of ours (failed sign-in counts, which need the database, live in
``viplanes.store.ratelimit``).

Modules: ``oidc``, ``oidcclaims``, ``oidcconsole``, ``tokencache``, ``tokens``.

Imports today: nothing of ours. Never (.importlinter): click, tests, api, cli, client, cluster,
controller, dataplane, lab, lanes, store.
"""
