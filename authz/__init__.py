"""authz component of VIP Lanes."""
