"""VIP Lanes: pre-authorized big-data flows steered around campus middleboxes."""

__version__ = "0.1.0"
