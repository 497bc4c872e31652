"""Headers every answer carries: ``X-Content-Type-Options: nosniff`` (a browser never guesses
another type than the one sent), and on JSON ``Cache-Control: no-store`` (job state, rows
and identities are per caller and change: no shared or browser cache may keep them).
"""

from __future__ import annotations

import falcon


class SafeHeaders:
    """Falcon middleware adding the headers above (an answer's own Cache-Control wins)."""

    def process_response(self, req: falcon.Request, resp: falcon.Response, resource, req_succeeded: bool) -> None:
        resp.set_header("X-Content-Type-Options", "nosniff")
        # None: the app's default media type, JSON
        kind = (resp.content_type or falcon.MEDIA_JSON).split(";")[0].strip().lower()
        if (kind.endswith("json") or kind == "text/event-stream") and not resp.get_header("Cache-Control"):
            resp.set_header("Cache-Control", "no-store")
