"""The campus model: YAML files, the loader/validator and lane path computation (networkx).
Imports nothing of ours; everything else may import it.
"""
