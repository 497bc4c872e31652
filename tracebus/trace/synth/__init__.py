"""Deterministic, seeded synthetic MES data in SQLite (DOMAIN.md section 6).

:func:`generate` writes the database; :func:`cids` returns the five-month trace CID set of
a station. Both are argparse-free so the CLI (``tracebus sample-data``) only parses flags.
"""

from tracebus.trace.synth.build import DEFAULT_SEED, generate
from tracebus.trace.synth.trace_set import cids

__all__ = ["DEFAULT_SEED", "cids", "generate"]
