"""Logging setup: one line per event, human-readable or JSON (``TRACEBUS_LOG_FORMAT``).

Events about a message carry who it belongs to. The worker runs each message inside
:func:`context` with the fields :func:`message_fields` derives from it (message id,
actor, and whatever the actor's module registered with :func:`describe_messages`: a
trace unit names its ``job_id`` and ``unit``), so every line logged while the message
runs or is settled (done, retried, dead-lettered) carries them: as JSON keys, or in the
text format appended as ``job_id=... unit=...`` when the message does not already say so.
The text console leaves out the per-unit lines below DEBUG (:data:`VERBOSE_LOGGERS`).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
import time
from typing import Callable, Iterator

#: Fields the text format appends when a line carries them (JSON carries every field).
TEXT_FIELDS = ("job_id", "unit")
#: Loggers of one line per unit of work: in the text format, shown only at DEBUG (a job's
#: start, end and a progress summary every 10 s stay at INFO).
VERBOSE_LOGGERS = ("tracebus.jobs.units",)

_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("tracebus_log_context", default=None)
_describers: dict[str, Callable[..., dict]] = {}
_STD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


@contextlib.contextmanager
def context(**fields) -> Iterator[dict]:
    """Attach ``fields`` to every record logged inside the block (nested blocks merge)."""
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield _context.get()
    finally:
        _context.reset(token)


def describe_messages(actor_name: str, describer: Callable[..., dict]) -> None:
    """Register how to name the messages of ``actor_name`` in logs.

    Args:
        actor_name(str): the actor.
        describer: called with the message's args and kwargs; returns log fields
            (e.g. ``{"job_id": ..., "unit": ...}``).
    """
    _describers[actor_name] = describer


def message_fields(message) -> dict:
    """Log fields of a :class:`tracebus.engine.message.Message`: id, actor and the actor's own."""
    fields = {"message_id": message.message_id, "actor": message.actor_name}
    describer = _describers.get(message.actor_name)
    if describer is not None:
        try:
            fields.update(describer(*message.args, **message.kwargs))
        except Exception:  # a log helper never breaks the message it describes
            pass
    return fields


class _ContextFilter(logging.Filter):
    """Copies the current :func:`context` onto each record (explicit ``extra=`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line with time, level, logger, pid, message and extras."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
               "pid": record.process, "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _STD})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time level [pid] logger: message``, plus ``job_id=... unit=...`` when not in the message."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)-7s [%(process)d] %(name)s: %(message)s")
        self.converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        job_id = getattr(record, "job_id", None)
        if job_id is None or str(job_id) in record.getMessage():
            return text
        first, sep, rest = text.partition("\n")  # before a traceback, if any
        return first + "".join(f" {k}={getattr(record, k)}" for k in TEXT_FIELDS
                               if hasattr(record, k)) + sep + rest


class _VerboseFilter(logging.Filter):
    """Drops the records of :data:`VERBOSE_LOGGERS` (the text console below DEBUG)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.name.startswith(VERBOSE_LOGGERS)


def setup(fmt: str = "text", level: str = "info") -> None:
    """Configure the root logger once (stderr).

    The text format (a console someone reads) shows the lines of :data:`VERBOSE_LOGGERS`
    only at ``debug``; the JSON format (read by machines) keeps every line at its level.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(_ContextFilter())
    if fmt != "json" and level.lower() != "debug":
        handler.addFilter(_VerboseFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
