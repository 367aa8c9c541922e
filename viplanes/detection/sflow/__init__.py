"""Detection from the switches: sFlow samples from the access switches -> per-flow rate estimates
-> ``Sighting(kind=SFLOW)`` for the acceptor (docs/automatic-lanes.md, "Detection from the
switches").

``estimator`` and ``detector`` are pure (the clock is passed in); ``goflow`` runs and reads the
collector (goflow2); ``switchconfig`` turns sFlow on and off on Open vSwitch bridges; ``service``
wires them for ``viplanes serve``; ``flowlabel`` reads the scitags marks from the same samples.

Modules: ``agents``, ``bound``, ``detector``, ``estimator``, ``flowlabel``, ``gate``, ``goflow``,
``ifindex``, ``metrics``, ``seal``, ``service``, ``switchconfig``.

Imports today: domain, detection.udplisten, settings. Never (.importlinter): tests, api, authz, auto,
cli, client, cluster, controller, dataplane, lab, lanes, policy, store, topologies.
"""
