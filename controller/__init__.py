"""The VIP Lanes controller: lanes become OpenFlow 1.3 rules on Open vSwitch.

``compile/``  pure: a lane + the topology -> flow messages as data (``compile/lane.py:compile_lane``
              is where a lane becomes rules), base and shared flows, cookies, flow identity, and
              ``reconcile.plan_switch`` (what a switch holds vs. what it should)
``runtime/``  the controller's state about live switches and lanes, with I/O passed in:
              ``LaneRuntime`` (the ``Dataplane``), activation, resync, drift, readiness, barriers
``openflow/`` os-ken glue: the listener, TLS, switch admission, message guards, roles, the app
              that binds the runtime's messages to live datapaths

Never imports the lane service, the store, the API, policy or the cluster (``.importlinter``);
it learns about lanes only as ``LaneSpec``s. docs/architecture.md draws the layers.
"""
