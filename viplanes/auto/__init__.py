"""Automatic lanes (issue 32), the pipeline that consumes sightings: grants that allow them, the
acceptor that turns a sighting into a lane through the lane service (a
``viplanes.lanes.desk.LaneDesk``), the NAT take-over, the idle end, and the wiring of the detectors
(``viplanes.detection``) to the acceptor. docs/automatic-lanes.md.

Modules: ``acceptor``, ``bounds``, ``campusnat``, ``ender``, ``fairqueue``, ``index``,
``metrics``, ``nathold``, ``natmap``, ``policy``, ``role``, ``service``, ``sflowwire``. Its rows
(grant policies, the global switch, live automatic lanes) are ``viplanes.store.automation``.

Imports today: authz, detection, domain, errors, lanes, policy, settings, store, topologies. Never
(.importlinter): tests.
"""
