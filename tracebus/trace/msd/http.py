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
kind's :meth:`~tracebus.trace.jobkind.JobKind.routes`). The handlers read the query string as the
values of a name (``values(name) -> list[str]``, the API's) through its declarations
(:mod:`.job.detailquery`, :data:`.lookups.SELECTED_QUERY`), which document it too.
"""

from __future__ import annotations

import functools
from typing import Callable

from tracebus.trace.msd.job.detailquery import DETAIL_QUERY, EXPORT_QUERY
from tracebus.trace.msd.job.detailstore import DetailStore
from tracebus.trace.msd.lookups import SELECTED_QUERY, MsdLookups
from tracebus.trace.routes import Doc, Download, Env, Reply, Route, ref

Values = Callable[[str], list[str]]
_OBJ, _STR, _INT = {"type": "object"}, {"type": "string"}, {"type": "integer"}


# -- the handlers ---------------------------------------------------------------------------------
def _lookup(read: str, env: Env):
    """``(values, user) ->`` the lookup ``read`` of :class:`~.lookups.MsdLookups` (kept per process)."""
    lookups = MsdLookups(env.settings, run=env.run)
    if read == "container_filter_options":
        return lambda values, user: Reply(*lookups.container_filter_options(SELECTED_QUERY.read(values)["selected"]))
    return lambda values, user: getattr(lookups, read)()


def _detail(env: Env):
    """``(values, user) ->`` one page of the detail table (paged, sorted, filtered at read time)."""
    details = DetailStore(env.store)

    def page(values: Values, user: str | None) -> dict:
        q = DETAIL_QUERY.read(values)
        return details.page(
            q["trace_query_id"], page=q["page"], page_size=q["page_size"], sort_by=q["sort_by"], order=q["order"],
            loss=q["loss_reasons"], pj=q["pj_types"], pkg=q["packages"], user=user)

    return page


def _export(env: Env):
    """``(values, user) ->`` the detail as CSV, streamed (a plain browser download)."""
    details = DetailStore(env.store)

    def export(values: Values, user: str | None) -> Download:
        q = EXPORT_QUERY.read(values)
        tqid = q["trace_query_id"]
        return Download(f"defect_trace_{tqid}.csv", "text/csv; charset=utf-8",
                        details.export_csv(tqid, loss=q["loss_reasons"], user=user))

    return export


# -- the documents --------------------------------------------------------------------------------
def _json(schema: dict, description: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _detail_doc(settings) -> Doc:
    detail = {"type": "object", "properties": {"detail": {"type": "array", "items": _OBJ},
                                               "pagination": _OBJ, "trace_query_id": _STR}}
    return Doc("One page of the MSD detail table of an events job, sorted and filtered at read time",
               {"200": (detail, "`{success, data: {detail, pagination, trace_query_id}, meta}`")},
               ("400", "404", "409", "410", "429", "503"), tuple(DETAIL_QUERY.parameters()))


def _export_doc(settings) -> Doc:
    return Doc("The MSD detail of an events job as CSV (UTF-8 with BOM), streamed",
               {"200": {"description": "attachment `defect_trace_<trace_query_id>.csv`",
                        "content": {"text/csv": {"schema": _STR}}}},
               ("400", "404", "409", "410", "429", "503"), tuple(EXPORT_QUERY.parameters()))


def _lookup_doc(summary: str, schema: str, description: str, errors: tuple[str, ...],
                params: tuple[dict, ...] = ()):
    return lambda settings: Doc(summary, {"200": _json(ref(schema), description)}, errors, params)


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
            "FilterOptions", "the options; meta has updated_at and schema_version", ("400", "503"), tuple(SELECTED_QUERY.parameters()))),
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
