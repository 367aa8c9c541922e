"""policy component of VIP Lanes."""
