"""tracebus benchmarks: ``python -m bench <scenario>`` (see bench/README.md).

Not tests: they print numbers and write reports to bench/results/, and never assert a timing.
"""
