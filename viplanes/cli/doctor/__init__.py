"""``viplanes doctor``: one command after an install that says what works and what to fix; one
folder for the command and the checks it runs.

- ``command``: the click command, the order of the checks, the exit code.
- ``checks``: database, PKI, topology, switches, readiness, clock (each returns findings).
- ``config``: the configuration file's check (every key of every table, private when secret).
- ``features``: per switch, what its capability profile lets it carry.
- ``service``: what the service itself would run with, when no flag says otherwise.

Modules: ``checks``, ``command``, ``config``, ``features``, ``service``.

Imports today: cli (campusfile, config, extras, main, services, settingsload, switch_causes),
cluster, controller.openflow (peer pins), pki, store, topologies. Never (.importlinter): tests,
and of the API only its factory.
"""
