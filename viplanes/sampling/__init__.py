"""Detection from the switches: sFlow samples from the access switches -> per-flow rate estimates
-> ``Sighting(kind=SFLOW)`` for the acceptor (docs/automatic-lanes.md, "Detection from the
switches").

``estimator`` and ``detector`` are pure (the clock is passed in); ``goflow`` runs and reads the
collector (goflow2); ``switchconfig`` turns sFlow on and off on Open vSwitch bridges; ``service``
wires them for ``viplanes serve``. Imports only ``viplanes.domain``.

Modules: ``agents``, ``bound``, ``detector``, ``estimator``, ``flowlabel``, ``gate``, ``goflow``,
``ifindex``, ``metrics``, ``seal``, ``service``, ``switchconfig``.

Imports today: domain, udplisten. Never (.importlinter): tests, api, authz, cli, client, cluster,
controller, dataplane, lab, lanes, policy, store, topologies.
"""
