"""controller component of VIP Lanes."""
