"""Every command line: ``viplanes ...`` (``main`` wires the groups) and the long-running entry points
(``serve``, ``api``, ``controller``). The only package that imports click; it may import anything.
"""
