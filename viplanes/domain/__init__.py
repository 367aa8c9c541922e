"""Shared facts: lane specs, activation results, port masks, lane matches, HOST:PORT values.

Pure values and functions, stdlib only. Imports nothing of ours: everything else may import it.
"""
