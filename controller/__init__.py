"""The VIP Lanes controller: lanes become OpenFlow 1.3 rules on Open vSwitch.

    compile/   pure: a lane + the topology -> flow messages as data (``compile/lane.py:compile_lane``),
               the base and shared flows, cookies, flow identity, and ``reconcile.plan_switch`` (a diff)
    runtime/   the state about live switches and lanes, and the threads that keep it true
               (``LaneRuntime``: the data plane the lane service calls)
    openflow/  os-ken glue: the listener (TLS, admission, per-peer limits, message guards), the app that
               binds the runtime's messages to live datapaths, the embedded and role-aware controllers

May import ``viplanes.domain``, ``viplanes.dataplane.base`` and ``viplanes.topologies``; never the lane
service, the store, policy, the API or an entry point (``.importlinter``). The packet simulators that
test what the compiled rules do live in ``tests/support/``.

Subpackages: ``compile``, ``openflow``, ``runtime``.

Imports today: dataplane, domain, pki, topologies. Never (.importlinter): click, tests, api, authz,
cli, client, cluster, lab, lanes, policy, store.
"""
