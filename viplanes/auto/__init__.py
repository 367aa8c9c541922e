"""Automatic lanes (issue 32): grants that allow them, the acceptor that turns a sighting into a
lane through the lane service (a ``viplanes.lanes.desk.LaneDesk``), the idle end, and the scitags firefly listener. docs/automatic-lanes.md."""
