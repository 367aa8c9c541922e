"""Automatic lanes (issue 32): grants that allow them, the acceptor that turns a sighting into a
lane through the lane service (a ``viplanes.lanes.desk.LaneDesk``), the idle end, and the scitags firefly listener. docs/automatic-lanes.md.

Modules: ``acceptor``, ``bounds``, ``campusnat``, ``ender``, ``fairqueue``, ``firefly``, ``index``,
``metrics``, ``nathold``, ``natmap``, ``policy``, ``role``, ``service``, ``sflowwire``, ``store``.

Imports today: authz, domain, errors, lanes, policy, sampling, store, topologies, udplisten. Never
(.importlinter): tests.
"""
