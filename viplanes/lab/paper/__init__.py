"""What the papers measured, as data: seed 000 (PEARC'18) section 4 and seed 004's streams curve.

Numbers are copied from the papers' text and tables (Mbit/s). `viplanes/lab/fidelity/` holds the
lab against them. The lab runs at 1:10, so a lab number is multiplied by `SCALE` before it is
compared.

Modules: ``grid`` (the `--paper` sweep), ``plots`` (the paper's figures from lab records).

Imports today: the lab's ``estimate``, ``filetools``, ``sweep`` and ``records``. Never
(.importlinter): click, tests, cli.
"""

from __future__ import annotations

from collections.abc import Mapping

SCALE = 10  # 1 lab Mbit/s stands for 10 real Mbit/s (topologies/campus.yaml)

# Table 2: upload and download speeds by location, Mbit/s: (mean, std dev, maximum)
TABLE2 = {
    ("desktop", "upload"): (395, 159, 734),
    ("dtn", "upload"): (854, 903, 5664),
    ("server", "upload"): (437, 381, 2164),
    ("desktop", "download"): (385, 176, 768),
    ("dtn", "download"): (1839, 1226, 5204),
    ("server", "download"): (1420, 799, 3986),
}
# The NICs behind Table 2 (Mbit/s): Aztec desktop 1 G, Flint server 10 G, the DTN 40 G.
PAPER_NIC = {"desktop": 1000, "server": 10000, "dtn": 40000}
CAMPUS_PATH = (100, 150)  # "the normal campus network (~100-150 Mbps)"
LANE_GAIN = (5.0, 7.0)  # "about 5-7x faster than going through the normal campus network"

# "for the DTN, when the chunk size changes from 4, to 8, to 16 and then to 32 MB, the mean
# throughput changes from 556, to 727, to 1046 and then to 1062 Mbps"
DTN_BY_CHUNK = {4: 556, 8: 727, 16: 1046, 32: 1062}
# "... whereas when the number of parallel transfers changes from 4, to 8, to 16 and then to 32,
# the mean throughput changes from 425, to 651, to 1077, and then to 1187 Mbps"
DTN_BY_TRANSFERS = {4: 425, 8: 651, 16: 1077, 32: 1187}
# "the maximum throughput from the Flint Server while pushing data to Google Drive measured 617,
# 1013, 1608, and 2164 Mbps when increasing the number of parallel transfers from 4 to 8 to 16
# to 32"
SERVER_MAX_BY_TRANSFERS = {4: 617, 8: 1013, 16: 1608, 32: 2164}

# Seed 004, Table 1: iperf aggregate Mbit/s by parallel streams over a 1 Gbit/s path.
STREAMS_LINK = 1000
STREAMS_IN = {
    1: 55.3,
    2: 107,
    3: 156,
    4: 204,
    5: 259,
    6: 295,
    7: 303,
    8: 385,
    9: 438,
    10: 501,
    11: 528,
    12: 602,
    13: 677,
    14: 704,
    15: 731,
    16: 729,
    17: 724,
    18: 737,
    19: 741,
    20: 760,
}  # Edinburgh to HPCx
STREAMS_OUT = {
    1: 36.9,
    2: 72.4,
    3: 108,
    4: 146,
    5: 183,
    6: 218,
    7: 255,
    8: 152,
    9: 324,
    10: 362,
    11: 397,
    12: 432,
    13: 467,
    14: 501,
    15: 533,
    16: 561,
    17: 595,
    18: 622,
    19: 655,
    20: 621,
}  # HPCx to Edinburgh


def spread(series: Mapping[int, float]) -> float:
    """Largest over smallest mean of a sweep: how much the parameter moved throughput."""
    values = [v for v in series.values() if v > 0]
    return max(values) / min(values) if values else 0.0
