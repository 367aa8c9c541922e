"""Detection: everything that turns what the campus says about a flow into a ``Sighting``
(viplanes/domain/sighting.py) and offers it to a ``SightingSink``; docs/automatic-lanes.md, "Detect".

Why one package: the detectors share one job (untrusted input in, a claim out), one seam (the sink
they are handed; the acceptor in ``viplanes.auto`` re-checks every claim against the grants) and
one socket (``udplisten``), and share nothing with the pipeline that consumes their sightings.
``viplanes.auto`` keeps that pipeline (accept, take over, end) and wires detectors to it.

- ``firefly``: scitags fireflies, UDP datagrams from the sending host, parsed and listened for.
- ``sflow``: sampled packets from the access switches: the gate, goflow2, the sample checks and
  the rate detector; with it the IPv6 flow-label marks (``sflow.flowlabel``), which are read from
  the same admitted samples before the rate detector and cannot run without them.
- ``udplisten``: the one UDP socket and receive thread the firefly listener and the sFlow gate each
  hold, calling them back through a declared ``DatagramHandler``.

Modules: ``firefly``, ``udplisten``. Subpackages: ``sflow``.

Imports today: domain, settings. Never (.importlinter): tests, api, authz, auto, cli, client,
cluster, controller, dataplane, lab, lanes, policy, store, topologies; nor os_ken.
"""
