"""The web monitor's files: ``GET /`` (the page) and ``GET /ui/{name}`` (its script and style).

A static page with no build step and nothing from a CDN: the files of ``api/ui/`` are read
once when the app is built and served from memory. They hold no data, so they are open
(``auth_required = False``); everything the page shows comes from the JSON API, called with
the caller's identity (api/ui/monitor.js says how the token is kept). The Content-Security-Policy
lets the page load and call nothing but this origin.
"""

from __future__ import annotations

from pathlib import Path

import falcon

#: The directory of the page's files.
UI_DIR = Path(__file__).resolve().parent.parent / "ui"
#: Content type per file suffix (other files are not served).
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}
#: Only this origin: scripts, styles, fetches; no frames, no plugins.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def load(directory: Path = UI_DIR) -> dict[str, tuple[bytes, str]]:
    """name -> (content, content type) of the servable files of ``directory``."""
    return {p.name: (p.read_bytes(), TYPES[p.suffix]) for p in sorted(directory.iterdir())
            if p.is_file() and p.suffix in TYPES}


class Ui:
    """The page at ``/`` and its files at ``/ui/{name}``.

    Args:
        files(dict[str, tuple[bytes, str]]): from :func:`load`.
    """

    auth_required = False
    enveloped = False

    def __init__(self, files: dict[str, tuple[bytes, str]]):
        self.files = files

    def _send(self, resp: falcon.Response, name: str) -> None:
        if name not in self.files:
            raise falcon.HTTPNotFound(description=f"no file {name[:60]!r} in the monitor "
                                                  f"(it has {', '.join(self.files)})")
        resp.data, resp.content_type = self.files[name]
        resp.set_header("Cache-Control", "no-cache")
        resp.set_header("X-Content-Type-Options", "nosniff")
        resp.set_header("Content-Security-Policy", CSP)
        resp.set_header("Referrer-Policy", "no-referrer")

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self._send(resp, "index.html")

    def on_get_file(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        self._send(resp, name or "index.html")  # /ui/ (an empty name) is the page too
