"""The HTTP API of tracebus: a Falcon (WSGI) app served by gunicorn.

:func:`api.app.create_app` builds the app from its dependencies (settings, broker, trace
service); :func:`api.app.get_app` is the gunicorn entry point (``gunicorn 'api.app:get_app()'
-c api/gunicorn.conf.py``). Resources in :mod:`api.resources` are thin: they parse the
request, call :class:`tracebus.trace.service.TraceService` and shape the answer; errors
become one JSON envelope in :mod:`api.errors`.
"""
