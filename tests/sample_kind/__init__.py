"""A job kind with routes of its own, written as docs/porting.md says (one folder: its ``kind.py``
registers it, its ``http.py`` declares its HTTP side), for tests/test_kind_routes.py.

Not under tracebus/trace/ and not in tracebus/trace/installed.py: the test imports ``kind.py``
(the registration line's import) and unregisters it after.
"""
