"""The VIP Lanes controller: lanes become OpenFlow 1.3 rules on Open vSwitch.

Pure (no sockets, no os-ken controller, tested with the simulator):
    compiler.py   a lane + the topology -> flow messages (``compile_lane``: where a lane becomes rules)
    guardflows.py base flows and priority bands: table-miss, bypass drops, source guards, ARP punt
    sharedflows.py  flows of an address several lanes share (switch-side ARP reply, ICMP transit)
    lanepath.py   a lane's source host, switch path and the way back to the host
    conntrack.py  the ct()/nat() actions and ct_state matches of stateful lanes
    cookies.py    the app's cookie range: which flows are ours and which lane they belong to
    flowkey.py    flow identity shared by a FlowMod and its flow-stats echo
    reconcile.py  desired messages vs. flows read back -> the difference (and hard-timeout refresh)
    flowstats.py  flow-stats replies decoded from the wire (reconcile at 20,000 flows)
    proxyarp.py   ARP answers for lane-pool addresses
    guard.py      length checks on every message a peer sends, before os-ken parses it
    pending.py    waiting for barriers, errors and flow-stats replies
    flowsim.py, netsim.py, ctsim.py   the OF1.3 flow-table, conntrack and campus simulator (tests)

State with I/O passed in:
    runtime.py    LaneRuntime (the Dataplane: activate/deactivate/counters, reconcile, refresh)
    embedded.py   EmbeddedController: LaneRuntime + os-ken in this process (`viplanes serve`)

os-ken glue:
    app.py        events -> LaneRuntime; LaneRuntime's send -> live datapaths
    ofserver.py   our OpenFlow listener (guarded reads, stoppable, handshake deadline)
    launcher.py   start os-ken 4.x apps without osken-manager
    cli.py        `viplanes controller run`
"""
