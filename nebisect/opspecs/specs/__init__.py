"""Op spec definitions, one module per op family; each registers with ``op_spec`` on import."""
