"""The query strings of the MSD detail and export routes, declared once (:mod:`tracebus.jobs.fields`).

``GET /api/mid-section-defect/analysis/detail`` reads :data:`DETAIL_QUERY` (a page of the
detail table, sorted and filtered at read time), ``/export`` reads :data:`EXPORT_QUERY`; the
kind's routes (:mod:`tracebus.trace.msd.http`) read them and document them from the same
declarations, and :meth:`~tracebus.trace.msd.job.detailstore.DetailStore.page` checks its page, size, sort key
and order with the same fields. The messages are the ones these routes always gave.
"""

from __future__ import annotations

from tracebus.jobs.fields import Choice, Custom, Int, Text
from tracebus.jobs.list_fields import Words
from tracebus.jobs.shapes import Query
from tracebus.trace.msd.job.detailrows import SORT_KEYS
from tracebus.trace.msd.params import TRACE_QUERY_ID

#: The most rows of a page.
MAX_PAGE_SIZE = 500
#: Rows per page when ``page_size`` is not given (the original's default).
DEFAULT_PAGE_SIZE = 200
#: The sort key when ``sort_by`` is not given.
DEFAULT_SORT = "defect_rate"
#: Largest ``page`` accepted (larger ones are typos, not pages).
MAX_PAGE = 2**31 - 1
#: Longest value of a read-time filter (``loss_reasons``, ``pj_types[]``, ``packages[]``), and of
#: the parameters the page sends along and the API ignores (``start_date``... ``direction``).
MAX_FILTER_LENGTH, MAX_IGNORED_LENGTH = 128, 64

_NOT_INT = "{name} must be an integer, got {value!r}"

TRACE_QUERY = Custom("trace_query_id", missing="trace_query_id is required", check_value=str.strip,
                     json={"type": "string", "pattern": f"^{TRACE_QUERY_ID.pattern}$"},
                     description="`msd-<16 hex>` of a completed MSD events job (another shape: 404 QUERY_NOT_FOUND)")
LOSS_REASONS = Words("loss_reasons", aliases=("loss_reasons[]",), max_length=MAX_FILTER_LENGTH,
                     description="comma-separated reasons, repeatable (read-time filter)")
#: What the page sends along and the API ignores (their length is bounded all the same).
IGNORED = tuple(Text(name, nullable=True, nonempty=False, max_length=MAX_IGNORED_LENGTH,
                     invalid='The "{name}" parameter is invalid. The value must be at most {max} characters.',
                     description=f"ignored (the query's {name})")
                for name in ("start_date", "end_date", "station", "direction"))
PAGE = Int("page", default=1, minimum=1, maximum=MAX_PAGE, not_int=_NOT_INT,
           too_small="{name} must be from 1 to {max}, got {value}", too_big="{name} must be from 1 to {max}, got {value}",
           description="page number")
PAGE_SIZE = Int("page_size", default=DEFAULT_PAGE_SIZE, minimum=1, maximum=MAX_PAGE_SIZE, not_int=_NOT_INT,
                too_small="{name} must be an integer from 1 to {max}, got {value!r}",
                too_big="{name} must be an integer from 1 to {max}, got {value!r}", description="rows")
SORT_BY = Choice("sort_by", choices=SORT_KEYS, default=DEFAULT_SORT, description=f"default {DEFAULT_SORT}")
ORDER = Choice("order", choices=("asc", "desc"), default="desc", casefold=True,
               invalid="order must be asc or desc, not {value!r}", description="asc or desc, any case (default desc)")

#: ``GET /api/mid-section-defect/export``.
EXPORT_QUERY = Query((TRACE_QUERY, LOSS_REASONS, *IGNORED))
#: ``GET /api/mid-section-defect/analysis/detail``.
DETAIL_QUERY = Query((TRACE_QUERY, LOSS_REASONS, *IGNORED,
                      Words("pj_types", aliases=("pj_types[]",), max_length=MAX_FILTER_LENGTH,
                            description="repeatable (read-time filter)"),
                      Words("packages", aliases=("packages[]",), max_length=MAX_FILTER_LENGTH,
                            description="repeatable (read-time filter)"),
                      PAGE, PAGE_SIZE, SORT_BY, ORDER))
