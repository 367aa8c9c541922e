"""api component of VIP Lanes."""
