"""Shared test support: packet simulators (flow table, conntrack, campus walk), fakes and helpers.

Never imported by the product.
"""
