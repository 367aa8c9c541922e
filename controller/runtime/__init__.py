"""The controller's state about live switches and lanes, and the threads that keep it true.

One ``SwitchState`` (``switches.py``) per runtime, shared by plain parts that each get it:
    lane_runtime.py  LaneRuntime: the Dataplane; wires the parts together, answers the app's events
    switches.py      SwitchState: switches, carried lanes, I/O functions, the change/compile locks
    wire.py          Wire: stage, write and wait for barriers; flow and aggregate stats requests
    batch.py         Changes: the one path that activates and removes lanes (one lane = a batch of one)
    inflight.py      InFlight and collect: a change on its way, each switch's answer to it
    resync.py        Resync: reconcile a switch (or all) against the desired lanes; warm-up
    drift.py         DriftWatch: the periodic flow count that reconciles a switch whose count is off
    readiness.py     SwitchReadiness: connected and reconciled, for /readyz and the 503 gate
    carried.py       CarriedLanes: the carried lanes with a count per shared flow
    pending.py       Tracker: outstanding barriers and stats requests (replies set events)
    heap.py          HeapFreezer (per runtime) and gc_held (process-wide: the GC is)
    lanestats.py     every carried lane's counters in one request per switch
    inspect.py       read-only facts for the operator console
    linkwatch.py     LinkWatch: the declared links live (re-route on port reports, cabling probes)
    replies.py       SwitchReplies: barrier replies, errors, flow stats, flow-removed, lane-pool ARP

I/O (send, barriers) is passed in. May import ``compile``, ``openflow.handshakes``, domain,
dataplane.base, topologies.

Modules: ``batch``, ``carried``, ``ctlimits``, ``drift``, ``heap``, ``inflight``, ``inspect``, ``lane_runtime``,
``lanestats``, ``links``, ``linkwatch``, ``moving``, ``outcome``, ``pending``, ``probeframe``, ``prober``,
``readiness``, ``refusals``, ``replies``, ``reroute``, ``resync``, ``switches``, ``switchfacts``, ``verify``,
``watching``, ``wire``.

Imports today: dataplane, domain, topologies. Never (.importlinter): click, tests, api, authz, cli,
client, cluster, lab, lanes, policy, store.
"""
