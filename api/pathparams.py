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

#: The check of each path parameter, by name: it raises a 404 error of the library.
CHECKS: dict[str, Callable[[str], object]] = {"job_id": check_job_id}
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

