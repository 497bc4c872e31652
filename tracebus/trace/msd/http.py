"""The MSD kind's HTTP side: the MSD page's lookups and its job's detail and export routes.

Its analysis itself is ``POST /api/trace/events`` with profile ``mid_section_defect`` (the
events route, shared with the events kind). Its own routes, each in the original's envelope
``{success, data, meta}`` whatever ``TRACEBUS_API_ENVELOPE`` says (the page reads
``result.data``: MSD.md section 7):

* ``GET /api/mid-section-defect/{station-options,loss-reasons,container-filter-options}``: the
  lookups (:class:`~.lookups.MsdLookups`), without a rate-limit bucket as in the original (the
  page calls all three on every load);
* ``GET /api/mid-section-defect/analysis/detail`` and ``/export``: an MSD job's detail rows, read
  from the stored data of the events job by ``trace_query_id`` (:class:`~.job.detailstore.DetailStore`),
  410 ``CACHE_EXPIRED`` once it expired; the export is a streamed CSV with a BOM.

The API serves, rate-limits and documents them from :func:`routes` and :func:`schemas` (the
kind's :meth:`~tracebus.trace.kinds.JobKind.routes`). The handlers read the query string as the
values of a name (``values(name) -> list[str]``, the API's).
"""

from __future__ import annotations

import functools
from typing import Callable

from tracebus.errors import InvalidParams
from tracebus.trace.kinds import Doc, Download, Env, Reply, Route, ref
from tracebus.trace.msd.job.detailrows import SORT_KEYS
from tracebus.trace.msd.job.detailstore import DEFAULT_PAGE_SIZE, DEFAULT_SORT, MAX_PAGE_SIZE, DetailStore
from tracebus.trace.msd.lookups import MsdLookups
from tracebus.trace.msd.params import TRACE_QUERY_ID

#: Largest ``page`` accepted (larger ones are typos, not pages).
MAX_PAGE = 2**31 - 1
#: Longest value of a read-time filter (``loss_reasons``, ``pj_types[]``, ``packages[]``), and of
#: the parameters the page sends along and the API ignores (``start_date``... ``direction``).
MAX_FILTER_LENGTH, MAX_IGNORED_LENGTH = 128, 64
IGNORED = ("start_date", "end_date", "station", "direction")

Values = Callable[[str], list[str]]
_OBJ, _STR, _INT = {"type": "object"}, {"type": "string"}, {"type": "integer"}


# -- reading the query string -------------------------------------------------------------------
def _last(values: Values, name: str) -> str | None:
    given = values(name)
    return given[-1] if given else None


def _list(values: Values, name: str) -> list[str] | None:
    """A list parameter sent as ``name[]=a&name[]=b``, ``name=a&name=b`` or ``name=a,b``."""
    given = values(f"{name}[]") + values(name)
    too_long = next((v for v in given if len(str(v)) > MAX_FILTER_LENGTH), None)
    if too_long is not None:
        raise InvalidParams(f"{name}: a value is longer than {MAX_FILTER_LENGTH} characters")
    out = [v.strip() for value in given for v in str(value).split(",") if v.strip()]
    return out or None


def _int(values: Values, name: str, default: int) -> int:
    raw = _last(values, name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidParams(f"{name} must be an integer, got {raw!r}") from None


def _page(values: Values) -> int:
    page = _int(values, "page", 1)
    if not 1 <= page <= MAX_PAGE:
        raise InvalidParams(f"page must be from 1 to {MAX_PAGE}, got {page}")
    return page


def _tqid(values: Values) -> str:
    for name in IGNORED:
        value = _last(values, name)
        if value is not None and len(value) > MAX_IGNORED_LENGTH:
            raise InvalidParams(f'The "{name}" parameter is invalid. The value must be at most '
                                f"{MAX_IGNORED_LENGTH} characters.")
    tqid = (_last(values, "trace_query_id") or "").strip()
    if not tqid:
        raise InvalidParams("trace_query_id is required")
    return tqid


# -- the handlers ---------------------------------------------------------------------------------
def _lookup(read: str, env: Env):
    """``(values, user) ->`` the lookup ``read`` of :class:`~.lookups.MsdLookups` (kept per process)."""
    lookups = MsdLookups(env.settings, run=env.run)
    if read == "container_filter_options":
        return lambda values, user: Reply(*lookups.container_filter_options(_last(values, "selected")))
    return lambda values, user: getattr(lookups, read)()


def _detail(env: Env):
    """``(values, user) ->`` one page of the detail table (paged, sorted, filtered at read time)."""
    details = DetailStore(env.store)

    def page(values: Values, user: str | None) -> dict:
        page_size = _int(values, "page_size", details.default_page_size)  # its range: DetailStore.page checks it
        return details.page(
            _tqid(values), page=_page(values), page_size=page_size, sort_by=_last(values, "sort_by"),
            order=_last(values, "order"), loss=_list(values, "loss_reasons"), pj=_list(values, "pj_types"),
            pkg=_list(values, "packages"), user=user)

    return page


def _export(env: Env):
    """``(values, user) ->`` the detail as CSV, streamed (a plain browser download)."""
    details = DetailStore(env.store)

    def export(values: Values, user: str | None) -> Download:
        tqid = _tqid(values)
        return Download(f"defect_trace_{tqid}.csv", "text/csv; charset=utf-8",
                        details.export_csv(tqid, loss=_list(values, "loss_reasons"), user=user))

    return export


# -- the documents --------------------------------------------------------------------------------
def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _query(name: str, schema: dict, description: str, required: bool = False) -> dict:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


def _always_enveloped(schema: dict) -> dict:
    return {"type": "object", "required": ["success", "data", "meta"], "properties": {
        "success": {"const": True}, "data": schema, "meta": _OBJ}}


def _common() -> list[dict]:
    short = {"type": "string", "maxLength": MAX_FILTER_LENGTH}
    ignored = {"type": "string", "maxLength": MAX_IGNORED_LENGTH}
    tqid = {"type": "string", "pattern": f"^{TRACE_QUERY_ID.pattern}$"}
    return [_query("trace_query_id", tqid, "`msd-<16 hex>` of a completed MSD events job (another "
                                           "shape: 404 QUERY_NOT_FOUND)", required=True),
            _query("loss_reasons", short, "comma-separated reasons (read-time filter)"),
            *(_query(n, ignored, f"ignored (the query's {n})") for n in IGNORED)]


def _detail_doc(settings) -> Doc:
    short = {"type": "string", "maxLength": MAX_FILTER_LENGTH}
    detail = {"type": "object", "properties": {"detail": {"type": "array", "items": _OBJ},
                                               "pagination": _OBJ, "trace_query_id": _STR}}
    return Doc("One page of the MSD detail table of an events job, sorted and filtered at read time",
               {"200": _json(_always_enveloped(detail), "`{success, data: {detail, pagination, trace_query_id}, meta}`")},
               ("400", "404", "409", "410", "429", "503"), tuple(_common() + [
                   _query("pj_types[]", short, "repeatable (read-time filter)"),
                   _query("packages[]", short, "repeatable (read-time filter)"),
                   _query("page", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1},
                          "page number"),
                   _query("page_size", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE,
                                        "default": DEFAULT_PAGE_SIZE}, "rows"),
                   _query("sort_by", {"enum": list(SORT_KEYS)}, f"default {DEFAULT_SORT}"),
                   _query("order", {"type": "string", "pattern": "^([aA][sS][cC]|[dD][eE][sS][cC])?$"},
                          "asc or desc, any case (default desc)")]))


def _export_doc(settings) -> Doc:
    return Doc("The MSD detail of an events job as CSV (UTF-8 with BOM), streamed",
               {"200": {"description": "attachment `defect_trace_<trace_query_id>.csv`",
                        "content": {"text/csv": {"schema": _STR}}}},
               ("400", "404", "409", "410", "429", "503"), tuple(_common()))


def _lookup_doc(summary: str, schema: str, description: str, errors: tuple[str, ...],
                params: tuple[dict, ...] = ()):
    return lambda settings: Doc(summary, {"200": _json(ref(schema), description)}, errors, params)


_SELECTED = {"name": "selected", "in": "query", "required": False,
             "content": {"application/json": {"schema": {"type": "object", "properties": {
                 k: {"type": "array", "items": _STR} for k in ("pj_types", "packages", "bops", "pj_functions")}}}},
             "description": "URL-encoded JSON object {pj_types, packages, bops, pj_functions}; unknown keys "
                            "and values are ignored; not a JSON object: 400"}


def routes() -> tuple[Route, ...]:
    """The MSD page's routes (the original's paths and rate-limit buckets: core/rate_limit.py)."""
    base = "/api/mid-section-defect"
    lookups = (
        ("station-options", "station_options", _lookup_doc(
            "Detection stations (workcenter groups) in order; always enveloped", "StationOptions", "the stations", ())),
        ("loss-reasons", "loss_reasons", _lookup_doc(
            "Every reject reason of the source (kept per process for 10 min); always enveloped", "LossReasons",
            "the reasons", ("503",))),
        ("container-filter-options", "container_filter_options", _lookup_doc(
            "Type / package / BOP / function options cross-filtered by `selected`; always enveloped",
            "FilterOptions", "the options; meta has updated_at and schema_version", ("400", "503"), (_SELECTED,))),
    )
    return (*(Route(f"{base}/{path}", "lookup", functools.partial(_lookup, read), doc, "msd", enveloped="always")
              for path, read, doc in lookups),
            Route(f"{base}/analysis/detail", "lookup", _detail, _detail_doc, "msd", "msd-detail", (15, 60), "always"),
            Route(f"{base}/export", "download", _export, _export_doc, "msd", "msd-export", (3, 60), "always"))


def schemas(settings) -> dict[str, dict]:
    """The schemas of the lookups' answers, documented already enveloped since they always are."""
    strs = {"type": "array", "items": _STR}
    return {
        "StationOptions": _always([{"type": "object", "required": ["name", "label", "order"],
                                    "properties": {"name": _STR, "label": _STR, "order": _INT}}], array=True),
        "LossReasons": _always({"type": "object", "required": ["loss_reasons"],
                                "properties": {"loss_reasons": strs}}),
        "FilterOptions": _always({"type": "object", "required": ["pj_types", "packages", "bops", "pj_functions"],
                                  "properties": {k: strs for k in ("pj_types", "packages", "bops",
                                                                   "pj_functions")}},
                                 {"updated_at": _STR, "schema_version": _INT}),
    }


def _always(data, extra_meta: dict | None = None, array: bool = False) -> dict:
    """An answer that is always the original's envelope."""
    return {"type": "object", "required": ["success", "data", "meta"], "properties": {
        "success": {"const": True}, "data": {"type": "array", "items": data[0]} if array else data,
        "meta": {"type": "object", "required": ["timestamp", "app_version", *(extra_meta or {})],
                 "properties": {"timestamp": _STR, "app_version": _STR, **(extra_meta or {})}}}}
