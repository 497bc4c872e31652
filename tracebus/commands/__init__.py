"""Subcommands of the ``tracebus`` CLI, one module each (see tracebus/cli.py)."""
