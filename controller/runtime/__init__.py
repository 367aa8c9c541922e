"""The controller's state about live switches and lanes, and the threads that keep it true.

I/O (send, barriers) is passed in. May import ``compile``, domain, dataplane.base, topologies.
"""
