"""Every path parameter is checked against its exact shape before a resource sees it.

Path parameters become parts of Redis keys further down (``/api/trace/job/{job_id}`` reads
``P:job:<job_id>``), so a value that is not of the shape the API hands out is answered 404
in the JSON error body right here: ``<id>:progress`` or ``<id>:units`` never reach a key
of another type. :data:`CHECKS` names the check of each parameter; a route with a parameter
that has none is refused when the app is built (:func:`check_routes`).
"""

from __future__ import annotations

import re
from typing import Callable

import falcon
from falcon import inspect

from tracebus.jobs.ids import check_job_id

_FILE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}")
#: A static file's name as a JSON-schema ``pattern`` (its OpenAPI path parameter).
FILE_NAME_PATTERN = f"^{_FILE_NAME.pattern}$"


def check_file_name(value: str) -> str:
    """A static file's name (the web monitor's ``/ui/{name}``; empty: its page), or 404."""
    if value and not _FILE_NAME.fullmatch(value):
        raise falcon.HTTPNotFound(description=f"no file {value[:60]!r}")
    return value


#: The check of each path parameter, by name: it raises a 404 error.
CHECKS: dict[str, Callable[[str], object]] = {"job_id": check_job_id, "name": check_file_name}
_FIELD = re.compile(r"{(\w+)(?::[^}]*)?}")


class PathParams:
    """Falcon middleware: run :data:`CHECKS` on the matched route's parameters."""

    def process_resource(self, req: falcon.Request, resp: falcon.Response, resource, params: dict) -> None:
        for name, value in params.items():
            CHECKS[name](value)


def check_routes(app: falcon.App) -> None:
    """Refuse an app one of whose routes has a path parameter without a check.

    Raises:
        RuntimeError: such a route (a bug of the app, found at start, not by a request).
    """
    missing = sorted({f"{route.path} ({name})" for route in inspect.inspect_routes(app)
                      for name in _FIELD.findall(route.path) if name not in CHECKS})
    if missing:
        raise RuntimeError(f"path parameters without a check in api.pathparams.CHECKS: {', '.join(missing)}")

