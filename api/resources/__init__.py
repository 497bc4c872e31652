"""Thin Falcon resources, one module per group of routes (see :func:`api.app.create_app`).

A request that may run as a job is answered now (200) or accepted as a job (202); the 202 is
written once, here (:func:`accepted`).
"""

from __future__ import annotations

import falcon


def accepted(resp: falcon.Response, answer: dict) -> None:
    """Answer 202 with ``answer`` (it names the job and its ``status_url``), and the status URL as
    ``Location``."""
    resp.status = falcon.HTTP_202
    resp.location = answer["status_url"]
    resp.media = answer
