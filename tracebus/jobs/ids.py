"""Job ids: how they are made and how a string that is not one is told apart.

A job id is ``<kind>-<24 hex>`` (96 random bits): holding one is what grants an anonymous
caller access to its job. Ids arrive from outside (URL paths, the CLI) and become parts of
Redis keys (``P:job:<id>``, ``P:job:<id>:units``, ...), so an id is checked against this
exact shape before it reaches a key: ``<id>:progress`` would otherwise name the job's
progress stream and be read as its hash.
"""

from __future__ import annotations

import os
import re

from tracebus.jobs.errors import JobNotFound

#: The longest job kind.
MAX_KIND_LENGTH = 40
#: A job kind: lowercase letters, digits, ``-`` and ``_``, starting with a letter.
KIND = re.compile(rf"[a-z][a-z0-9_-]{{0,{MAX_KIND_LENGTH - 1}}}")
#: A job id: a kind, ``-``, 24 lowercase hex digits.
JOB_ID = re.compile(rf"(?:{KIND.pattern})-[0-9a-f]{{24}}")
#: The same as a JSON-schema ``pattern`` (anchored: JSON schema patterns search).
JOB_ID_PATTERN = f"^{JOB_ID.pattern}$"
#: The longest job id.
MAX_JOB_ID_LENGTH = MAX_KIND_LENGTH + 1 + 24


def new_job_id(kind: str) -> str:
    """A fresh id for a job of ``kind``.

    Raises:
        ValueError: ``kind`` is not a :data:`KIND` (a bug of the job kind, not of a request).
    """
    if not KIND.fullmatch(kind):
        raise ValueError(f"job kind {kind!r} must match {KIND.pattern}")
    return f"{kind}-{os.urandom(12).hex()}"


def is_job_id(value: object) -> bool:
    """True when ``value`` has the shape of a job id (whether or not the job exists)."""
    return isinstance(value, str) and JOB_ID.fullmatch(value) is not None


def check_job_id(value: object) -> str:
    """``value`` if it has the shape of a job id.

    Raises:
        JobNotFound: it has not (no such job can exist), before any Redis key is built.
    """
    if not is_job_id(value):
        plain = isinstance(value, str) and value.isprintable() and len(value) <= 80
        raise JobNotFound(f"no job {value if plain else repr(str(value)[:80])}")  # one line, whatever it is
    return value
