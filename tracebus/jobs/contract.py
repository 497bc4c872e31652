"""The dashboard's generic job contract: any job as the original's poller reads it.

The original's ``GET /api/job/<id>?prefix=<type>`` (routes/job_routes.py, answered from
async_query_job_service.get_job_status) gives ``job_id``, ``status`` (queued / running /
completed / failed), ``progress`` (a string), ``pct``, ``stage``, ``completed_stages``,
``query_id``, ``dataset_id``, ``elapsed_seconds``, ``created_at``, ``completed_at`` and ``error``;
its pages poll it with useAsyncJobPolling.ts, which stops on completed (or finished) and on
failed. :func:`render` builds that document from the generic detail document
(:meth:`tracebus.jobs.store.JobStore.detail`) of a job of any kind; a :class:`KindView` adds
what only the kind knows (its progress words, ``query_id``/``dataset_id``, its result), and
the base class serves a kind that declares nothing.

The contract's states are :data:`~tracebus.jobs.states.PUBLIC_STATUS` of the internal states
(:class:`tracebus.jobs.states.JobState`, mapped there and nowhere else): a ``partial`` job has completed
(``failed_sections`` says what is missing), a ``cancelled`` one has failed with ``code``
:data:`~tracebus.jobs.states.JOB_CANCELLED`, so the poller stops on both. The sections become the stages: ``stage``
is the first section still unfinished while the job runs, ``completed_stages`` those whose
units are all done.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator

import orjson

from tracebus.jobs.errors import JobNotComplete, JobStateConflict
from tracebus.jobs.states import (CANCELLED_MESSAGE, FINAL_STATES, PUBLIC_CODE, PUBLIC_STATUS, RESULT_STATES,
                                  JobState, UnitState, public_progress)


#: A job's 202 answer in the contract (a query kind's route, ``POST /api/v1/jobs``): the job and
#: where to poll it (``status_url``) and read its result (``result_url``).
ACCEPTED_SCHEMA = {"type": "object", "required": ["async", "job_id", "status_url", "result_url"], "properties": {
    "async": {"const": True}, "job_id": {"type": "string"}, "kind": {"type": "string"},
    "status_url": {"type": "string"}, "result_url": {"type": "string"}}}


def kind_of(job_id: str) -> str:
    """The kind of a job id (``<kind>-<24 hex>``, already checked): its prefix in the contract."""
    return job_id[:-25]


class KindView:
    """What the generic contract asks of a job's kind; these defaults serve any kind.

    A kind overrides :meth:`state` (when it judges a job's end itself), :meth:`progress` (the
    words of a running job), :meth:`ids` (the keys a completed job's result is known by) and
    :meth:`result` (its result document).
    """

    def state(self, doc: dict) -> str:
        """The internal state (:data:`STATES`) the contract shows: the job's."""
        return doc["status"]

    def progress(self, doc: dict) -> str:
        """``progress`` of a job whose detail document is ``doc``: '' while queued,
        'running (settled/total units)', 'complete', or the final state."""
        p = doc["progress"]
        return public_progress(doc["status"], p["units_done"] + p["units_failed"], p["units_total"])

    def ids(self, doc: dict) -> tuple[str | None, str | None]:
        """``(query_id, dataset_id)``: once completed the job id (its result's key), no dataset."""
        return (doc["job_id"], None) if doc["status"] in RESULT_STATES else (None, None)

    def result(self, store, doc: dict, user: str | None) -> Iterator[bytes]:
        """The result of a completed job as one JSON document, streamed (see :func:`sections_document`).

        Raises:
            JobNotComplete: queued or running. JobStateConflict: failed or cancelled.
            JobResultExpired: a chunk is gone.
        """
        check_completed(doc, self.state(doc))
        return sections_document(store, doc)


def render(doc: dict, view: KindView) -> dict:
    """The contract's status document of the job whose generic detail document is ``doc``."""
    state = view.state(doc)
    status = PUBLIC_STATUS[state]
    p = doc["progress"]
    settled, total = p["units_done"] + p["units_failed"], p["units_total"]
    pct = 100 if state in RESULT_STATES else (int(100 * settled / total) if total else 0)
    done = [s["section"] for s in doc.get("section_states", ()) if s["state"] == UnitState.DONE]
    stage = None
    if state == JobState.RUNNING:
        stage = next((s["section"] for s in doc["section_states"] if s["state"] != UnitState.DONE), None)
    query_id, dataset_id = view.ids(doc)
    out = {
        "job_id": doc["job_id"], "kind": doc["kind"], "status": status, "state": state,
        "progress": view.progress(doc), "pct": pct, "stage": stage, "completed_stages": done,
        "query_id": query_id, "dataset_id": dataset_id,
        "elapsed_seconds": round(doc["elapsed_seconds"], 1), "created_at": doc["created_at"],
        "completed_at": doc["finished_at"],
        "error": doc["error"] or (f"job {state}" if state == JobState.FAILED else None),
        "failed_sections": doc["failed_sections"],
        "reused_from": doc.get("reused_from"), "result_age_s": doc.get("result_age_s"),
    }
    if state in PUBLIC_CODE:
        out["code"] = PUBLIC_CODE[state]
    if state == JobState.CANCELLED:
        out["error"] = doc["error"] or CANCELLED_MESSAGE
    return out


def check_completed(doc: dict, state: str) -> None:
    """Nothing when the job's result can be read (internal ``state`` completed or partial).

    Raises:
        JobNotComplete: the job is queued or running (``status`` says which).
        JobStateConflict: it failed or was cancelled: waiting will not help.
    """
    if state in RESULT_STATES:
        return
    if state in FINAL_STATES:
        raise JobStateConflict(f"job {doc['job_id']} is {state}: {doc['error'] or 'no result'}",
                               status=PUBLIC_STATUS[state])
    raise JobNotComplete(f"job {doc['job_id']} has not completed yet", status=state)


#: Rows per slice of a streamed document.
SLICE_ROWS = 64


def batched(items: Iterable, size: int = SLICE_ROWS) -> Iterator[list]:
    """``items`` in lists of ``size`` (the last shorter)."""
    items = iter(items)
    while batch := list(itertools.islice(items, size)):
        yield batch


def sections_document(store, doc: dict) -> Iterator[bytes]:
    """``{"job_id", "kind", "results": {section: {"columns", "data", "count"}}, "failed_sections"}``,
    every section's rows (objects by column name) in order, a slice of a stored chunk read and
    :data:`SLICE_ROWS` rows written at a time (a reader that stops reading holds that much).

    Every chunk is checked present before the first byte, so an expired result is an error,
    not a truncated body; failed sections have no ``results`` entry.
    """
    job_id, failed = doc["job_id"], list(doc["failed_sections"])
    sections = [s for s in doc["sections"] if s not in failed]
    layouts = store.layouts(job_id, sections)

    def body() -> Iterator[bytes]:
        yield b'{"job_id":' + orjson.dumps(job_id) + b',"kind":' + orjson.dumps(doc["kind"]) + b',"results":{'
        for i, section in enumerate(sections):
            yield (b"," if i else b"") + orjson.dumps(section) + b':{"data":['
            columns, count = [], 0
            for columns, rows in store.iter_chunk_rows(job_id, section, layouts[section]):
                for batch in batched(orjson.dumps(dict(zip(columns, r))) for r in rows):
                    yield (b"," if count else b"") + b",".join(batch)
                    count += len(batch)
            yield b'],"columns":' + orjson.dumps(list(columns)) + b',"count":' + str(count).encode() + b"}"
        yield b'},"failed_sections":' + orjson.dumps(failed) + b"}"

    return body()
