"""``/api/v1/dead-letters[/requeue|/purge]``: the dead-letter streams, for operators only.

A dead record holds another user's message (its arguments, its traceback), so reading one
is an operator's act like requeueing or purging it (:mod:`api.operators`). The actions take
a JSON body and require ``Content-Type: application/json``: a cross-site HTML form cannot
send that type, so a browser session behind a cookie-based proxy cannot be made to purge.
"""

from __future__ import annotations

import falcon

from tracebus.engine import dead_letters
from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Custom, Flag, Int
from tracebus.jobs.list_fields import Tokens
from tracebus.jobs.shapes import Query, Shape

from api.inputs import query, read_json

#: The listing's query string: one queue (checked against the known queues) and records per queue.
LIST_QUERY = Query((Custom("queue", json={"type": "string"}, description="one queue (default: every queue)"),
                    Int("limit", minimum=1, maximum=500, default=50, description="newest records per queue")))
#: Ids per action, at most.
MAX_IDS = 1000
#: Largest body of an action (ids only).
MAX_BODY_BYTES = 64 * 1024
#: The body of an action, ``{"queue", "ids": [...]}`` or ``{"queue", "all": true}``; the OpenAPI
#: ``DeadLetterTargets`` is derived from it. The queue is checked against the known queues
#: (another name: 404) before the others, and the rule across ``ids`` and ``all`` is checked
#: by :meth:`DeadLetters._targets`.
TARGETS_REQUEST = Shape((
    Custom("queue", required=True, json={"type": "string"}),
    Tokens("ids", pattern=r"^[0-9]{1,20}-[0-9]{1,20}$", max_items=MAX_IDS, nullable=True,
           invalid="ids must be a list of 1 to {max} record ids like '1700000000000-0'",
           description="dead-record ids (`<ms>-<seq>`)"),
    Flag("all", invalid="all must be true or false", description="every record of the queue (instead of ids)"),
), not_object='body must be a JSON object {"queue", "ids": [...]} or {"queue", "all": true}', rules={
    # Either a list of ids (all absent or false) or "all": true (ids absent or null), never both.
    "oneOf": [{"required": ["ids"], "properties": {"ids": {"type": "array"}, "all": {"const": False}}},
              {"required": ["all"], "properties": {"all": {"const": True}, "ids": {"type": "null"}}}]})


def _json_safe(value, depth: int = 0):
    """A message argument as JSON can carry it (bytes and other types as their repr)."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if depth < 8 and isinstance(value, (list, tuple)):
        return [_json_safe(v, depth + 1) for v in value]
    if depth < 8 and isinstance(value, dict):
        return {str(k): _json_safe(v, depth + 1) for k, v in value.items()}
    return repr(value)[:200]


def record(queue: str, entry: dict) -> dict:
    """A dead entry as the API shows it (:func:`tracebus.engine.dead_letters.record`): the
    reason's first line, the rest as ``traceback``, the message's arguments as JSON carries them."""
    out = {k: _json_safe(v) for k, v in dead_letters.record(queue, entry).items()}
    reason, _, trace = out["reason"].partition("\n")
    return {**out, "reason": reason, "traceback": trace or None}


class DeadLetters:
    """List, requeue and purge dead-lettered messages.

    Args:
        broker: the :class:`~tracebus.engine.broker.Broker`.
        operators: the :class:`~api.operators.Operators` check.
        queue(str): the trace queue, known even before anything declared it.
    """

    def __init__(self, broker, operators, queue: str):
        self.broker, self.operators, self.queue = broker, operators, queue

    def _known(self) -> list[str]:
        return dead_letters.known_queues(self.broker, self.queue)

    def _check_queue(self, name) -> str:
        known = self._known()
        if not isinstance(name, str):
            raise InvalidParams(f"queue must be one of {', '.join(known)}; got {type(name).__name__}")
        if name not in known:  # a well-formed name of no queue: not found, as an unknown job id
            raise falcon.HTTPNotFound(description=f"no queue named {name[:60]!r}; the queues are {', '.join(known)}")
        return name

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        self.operators.require(req)
        q = query(req, LIST_QUERY)
        queue, limit = q["queue"], q["limit"]
        names = [self._check_queue(queue)] if queue is not None else self._known()
        records = [record(q, e) for q in names for e in self.broker.dead_entries(q, count=limit)]
        records.sort(key=lambda r: r["time"], reverse=True)
        resp.media = {"queues": names, "records": records}

    def _targets(self, req: falcon.Request) -> tuple[str, list[str] | None]:
        """(queue, ids) from the body ``{"queue", "ids": [...]}`` or ``{"queue", "all": true}``
        (ids None: all)."""
        self.operators.require(req)
        if (req.content_type or "").split(";")[0].strip().lower() != falcon.MEDIA_JSON:
            raise falcon.HTTPUnsupportedMediaType(description="send the body as Content-Type: application/json")
        body = read_json(req, MAX_BODY_BYTES)
        if not isinstance(body, dict):
            raise InvalidParams(TARGETS_REQUEST.not_object)
        queue = self._check_queue(body.get("queue"))
        everything = TARGETS_REQUEST.value(body, "all")
        if (body.get("ids") is not None) == everything:
            raise InvalidParams('give either "ids" (a list of record ids) or "all": true, not both')
        if everything:
            return queue, None
        return queue, TARGETS_REQUEST.value(body, "ids")

    def on_post_requeue(self, req: falcon.Request, resp: falcon.Response) -> None:
        queue, ids = self._targets(req)
        results = dead_letters.requeue(self.broker, queue, ids)
        resp.media = {"queue": queue,
                      "requeued": [r for r in results if "requeued_as" in r],
                      "skipped": [{"id": r["id"], "reason": r["skipped"]} for r in results if "skipped" in r]}

    def on_post_purge(self, req: falcon.Request, resp: falcon.Response) -> None:
        queue, ids = self._targets(req)
        deleted, missing = dead_letters.purge(self.broker, queue, ids)
        resp.media = {"queue": queue, "deleted": deleted, "missing": missing}
