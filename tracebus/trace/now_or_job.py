""""Answer now or make a job", once, for every request that may be either.

A request of ``POST /api/trace/events``, of a stage (``seed-resolve``, ``lineage``) or of a
declared query kind is checked first (a bad one is refused before any read or job), then the
operation that serves it says whether it is answered now (200) or admitted as a job (202);
a request answered now may instead be answered by a stored answer of the same request (an MSD
analysis already run). :func:`decide` is that rule; each operation (a :class:`NowOrJob`)
supplies its steps, and the API's one resource for such routes writes what :func:`decide`
returns (:class:`Answer`). No HTTP here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator


class NowOrJob:
    """The steps of a request that is answered now or admitted as a job; subclasses override
    :meth:`check`, :meth:`is_async`, :meth:`now` and :meth:`submit` (and :meth:`stored`).

    ``what`` names the answer made now in the logs of a stream cut short.
    """

    what = "answer"

    def check(self, body: Any, user: str) -> Any:
        """The checked request.

        Raises:
            InvalidParams (and the request's other refusals): before any read or job.
        """
        raise NotImplementedError

    def is_async(self, request: Any) -> bool:
        """Whether ``request`` is a job rather than answered now."""
        raise NotImplementedError

    def now(self, request: Any, user: str) -> dict | Iterator[bytes]:
        """The answer made now: a document, or its JSON streamed as bytes."""
        raise NotImplementedError

    def stored(self, request: Any) -> dict | None:
        """A stored answer of the same request, given at once instead of a job (None: none)."""
        return None

    def submit(self, request: Any, user: str, fresh: bool) -> dict:
        """Admit ``request`` as a job (``fresh``: not answered from a stored result); the 202
        answer, which names the job and its ``status_url``.

        Raises:
            QuotaExceeded, CostLimitExceeded, ...: the job is refused.
        """
        raise NotImplementedError


@dataclass(frozen=True)
class Answer:
    """What :func:`decide` gives: ``job`` True, the 202 answer; else the 200 body (a document,
    or JSON bytes when ``streamed``)."""

    job: bool
    body: Any

    @property
    def streamed(self) -> bool:
        return not self.job and not isinstance(self.body, dict)


def decide(op: NowOrJob, body: Any, user: str, fresh: bool = False, always_job: bool = False) -> Answer:
    """Check ``body`` with ``op``; answer it now when ``op`` says so (and not ``always_job``),
    else from a stored answer of the same request (unless ``fresh``), else as a new job.

    Raises:
        what ``op`` raises: a refused request or job.
    """
    request = op.check(body, user)
    if not always_job and not op.is_async(request):
        return Answer(False, op.now(request, user))
    stored = None if fresh or always_job else op.stored(request)
    if stored is not None:
        return Answer(False, stored)
    return Answer(True, op.submit(request, user, fresh))
