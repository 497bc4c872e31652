"""tracebus: background jobs for long, heavy database queries.

The public surface: the :func:`actor` decorator (Dramatiq-style), :class:`Broker`,
:class:`Message`, :class:`Settings` and the error hierarchy in :mod:`tracebus.errors`.
"""
