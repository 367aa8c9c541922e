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
    peerauth.py   may this certificate claim this dpid? token buckets for what a peer may cost
    pending.py    waiting for barriers, errors and flow-stats replies
    flowsim.py, netsim.py, ctsim.py   the OF1.3 flow-table, conntrack and campus simulator (tests)

State with I/O passed in:
    runtime.py    LaneRuntime (the Dataplane: activate/deactivate/counters, reconcile, refresh)
    embedded.py   EmbeddedController: LaneRuntime + os-ken in this process (`viplanes serve`)
    admission.py  which connection holds each dpid; a live one is never taken over

os-ken glue:
    app.py        events -> LaneRuntime; LaneRuntime's send -> live datapaths
    ofserver.py   our OpenFlow listener (TLS, admission, limits, guarded reads, stoppable)
    oftls.py      TLS server context (campus CA, client cert required) and a thread-safe channel
    ofhandler.py  os-ken's handshake app running our listener
    security_cli.py  --pki / --insecure-tcp / --switch-cert-pin for serve and controller run
    launcher.py   start os-ken 4.x apps without osken-manager
    cli.py        `viplanes controller run`
"""
