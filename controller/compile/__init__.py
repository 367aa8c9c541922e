"""Pure: a lane and the topology -> OpenFlow 1.3 messages as data (``datapath=None``), and the diff
of what a switch holds against what it should (``reconcile``). No threads, no sockets, no clock.

May import domain and topologies; never ``runtime`` or ``openflow``.
"""
