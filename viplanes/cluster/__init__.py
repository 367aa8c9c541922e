"""The split deployment: the master lease, the API -> controller hand-off and what the master reports.

May import the lane service, the store and the data plane; the controller only through its
declared runtime classes. Never the API or an entry point.

Modules: ``clockcheck``, ``handoff``, ``leader``, ``liveness``, ``metrics``, ``node``, ``renewals``, ``reports``,
``wakeups``.

Imports today: auto, controller, detection, domain, errors, lanes, store. Never (.importlinter): click,
tests, api, cli.
"""
