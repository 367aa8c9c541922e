"""The one seam between the lane service and the switches, and its implementations.

``base.Dataplane`` declares every call the lane service makes; ``memory`` (tests, API-only runs)
and ``remote`` (an API process whose controller is another process) implement it, as does the
controller's ``LaneRuntime``. ``base`` imports only ``domain``.
"""
