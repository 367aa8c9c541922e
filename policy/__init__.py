"""Grants and the pure decision "is this lane request inside a grant?" (``rules.decide``: a machine
code plus a human reason), and which destinations a campus may name. Imports only ``topologies``:
no store, no controller, no API.

Modules: ``destinations``, ``rules``.

Imports today: topologies. Never (.importlinter): click, tests, api, cli, client, cluster, controller,
dataplane, lab, lanes, store.
"""
