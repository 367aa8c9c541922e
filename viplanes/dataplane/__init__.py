"""The one seam between the lane service and the switches, and its implementations.

``base.Dataplane`` declares every call the lane service, the API and the entry points make (how a
plane carries lanes: one ``base.PlaneCapabilities`` value); ``memory`` (tests,
API-only runs) and ``remote`` (an API process whose controller is another process) implement it,
as does the controller's ``LaneRuntime``, each writing out every member (no base class). ``base`` imports only ``domain``; ``remote`` also the
store and ``cluster.handoff`` (the NOTIFY plumbing it waits on).

Modules: ``base``, ``memory``, ``remote``.

Imports today: cluster, domain, store. Never (.importlinter): click, tests, api, cli.
"""
