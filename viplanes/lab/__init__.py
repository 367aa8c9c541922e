"""lab component of VIP Lanes."""
