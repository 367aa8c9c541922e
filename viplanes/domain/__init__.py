"""Shared facts: lane specs, activation results, port masks, lane matches, HOST:PORT values, and
the steady clock lane windows are judged on.

Pure values and functions, stdlib only. Imports nothing of ours: everything else may import it.
"""
