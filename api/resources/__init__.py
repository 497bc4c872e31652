"""Thin Falcon resources, one module per group of routes (see :func:`api.app.create_app`)."""
