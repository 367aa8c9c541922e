"""The campus model: YAML files, the loader/validator and lane path computation."""
