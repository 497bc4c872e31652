"""Reading an MSD job's detail rows by ``trace_query_id``: pages and the CSV export (MSD.md §3).

A page walks the precomputed ordering of its sort key (packed uint32 row ids, ascending;
``desc`` walks it from the end) in windows: one GETRANGE of the window's ids, one HMGET of
their rows, the read-time filters applied to each row. ``total_count`` comes from the
per-cell counts stored at the reduce (one entry per distinct type x package x reasons), not
from the rows.

Cost of page ``p`` of size ``s``: O(s) Redis reads and decoded rows without filters; with
filters O(positions walked) = O(p * s / f) where ``f`` is the fraction of rows the filters
keep. It does not depend on the number of rows in the job — except through a filter that
keeps almost nothing, or a deep page, where the walk to the page's last row is longer.
"""

from __future__ import annotations

import csv
import io
from array import array
from typing import Iterator

from tracebus.jobs.errors import JobNotComplete, JobNotFound
from tracebus.jobs.states import RESULT_STATES
from tracebus.trace.errors import CacheExpired, QueryNotFound
from tracebus.jobs.csvcells import neutral
from tracebus.trace import owners
from tracebus.trace.msd.keys import MsdKeys
from tracebus.trace.msd.params import TRACE_QUERY_ID
from tracebus.trace.msd.job import detailrows
from tracebus.trace.msd.job.detailquery import DEFAULT_PAGE_SIZE, DEFAULT_SORT, ORDER, PAGE, PAGE_SIZE, SORT_BY
from tracebus.trace.msd.job.plan import unpack

_WINDOW = 256
#: The export's (column, header) pairs: the original's CSV_COLUMNS_BACKWARD / CSV_COLUMNS_FORWARD
#: (mid_section_defect_service.py), written by its ``MsdDuckdbRuntime.export_csv``.
BACKWARD_CSV = (("CONTAINERNAME", "LOT ID"), ("PJ_TYPE", "TYPE"), ("PRODUCTLINENAME", "PACKAGE"),
                ("WORKFLOW", "WORKFLOW"), ("DETECTION_EQUIPMENTNAME", "偵測設備"), ("INPUT_QTY", "投入數"),
                ("LOSS_REASON", "報廢原因"), ("DEFECT_QTY", "不良數"), ("DEFECT_RATE", "不良率(%)"),
                ("ANCESTOR_COUNT", "上游LOT數"), ("UPSTREAM_MACHINE_COUNT", "上游台數"))
FORWARD_CSV = (("CONTAINERNAME", "LOT ID"), ("DETECTION_EQUIPMENTNAME", "偵測設備"),
               ("DETECTION_LOSS_REASON", "前段不良原因"), ("TRACKINQTY", "偵測投入"), ("DEFECT_QTY", "偵測不良"),
               ("DOWNSTREAM_STATIONS_REACHED", "下游到達站數"), ("DOWNSTREAM_TOTAL_REJECT", "下游不良總數"),
               ("DOWNSTREAM_REJECT_RATE", "下游不良率(%)"))


class DetailStore:
    """Detail reads of MSD jobs.

    Args:
        store(JobStore): the job store (its Redis holds the rows and orderings too).
    """

    def __init__(self, store):
        self.store = store
        self.redis = store.redis
        self.keys = MsdKeys(store.settings.key_prefix)

    def job_of(self, trace_query_id: str, user: str | None = None) -> tuple[str, dict]:
        """(job id, app fields) of ``user``'s completed MSD job of that id (None: anyone's).

        Another user's job is answered as an unknown id: the id is computable from the request.

        Raises:
            QueryNotFound: not of the shape of a trace_query_id.
            CacheExpired: unknown or expired trace_query_id.
            JobNotComplete: the job is still running.
        """
        if not isinstance(trace_query_id, str) or not TRACE_QUERY_ID.fullmatch(trace_query_id):
            raise QueryNotFound(f"no MSD query {str(trace_query_id)[:80]!r}: a trace_query_id is 'msd-' "
                                f"and 16 hex digits")
        index = self.keys.index(trace_query_id)
        raw = (self.redis.hget(index, owners.scope(user)) if user is not None
               else next(iter(self.redis.hvals(index)), None))
        if raw is None:
            raise CacheExpired(f"no stored MSD result for trace_query_id {trace_query_id!r}; run the query again")
        job_id = raw.decode()
        try:
            doc = self.store.status(job_id)
        except JobNotFound:
            raise CacheExpired(f"the MSD result of {trace_query_id} expired; run the query again") from None
        if not owners.may_access(doc.get("user"), user):
            raise CacheExpired(f"no stored MSD result for trace_query_id {trace_query_id!r}; run the query again")
        if doc["status"] not in RESULT_STATES:
            raise JobNotComplete(f"MSD job {job_id} is {doc['status']}", status=doc["status"])
        if self.redis.exists(self.keys.order(self.store.data_id(job_id), DEFAULT_SORT)) == 0:
            raise CacheExpired(f"the MSD detail of {trace_query_id} expired; run the query again")
        return job_id, doc["app"]

    def page(self, trace_query_id: str, *, page: int = 1, page_size: int = DEFAULT_PAGE_SIZE,
             sort_by: str | None = None, order: str | None = None, loss=None, pj=None, pkg=None,
             user: str | None = None) -> dict:
        """``{detail, pagination, trace_query_id}`` of one page of ``user``'s job.

        Raises:
            InvalidParams: bad page, page_size, sort_by or order.
            CacheExpired, JobNotComplete: see :meth:`job_of`.
        """
        sort_by, descending = _check(page, page_size, sort_by, order)
        job_id, app = self.job_of(trace_query_id, user)
        filters = (_set(loss), _set(pj), _set(pkg))
        if any(filters):  # O(filter cells): distinct (kind, type, package, reasons), not rows
            cells = unpack(self.store.get_artifact(job_id, "detail_cells"), [])
            total = sum(c[4] for c in cells if detailrows.cell_visible(c, *filters))
        else:
            total = unpack(self.store.get_artifact(job_id, "detail_total"), 0)
        skip, rows = (page - 1) * page_size, []
        for row in self._walk(job_id, sort_by, descending, filters):
            if skip:
                skip -= 1
                continue
            rows.append(row)
            if len(rows) == page_size:
                break
        rows = self._expand(job_id, app, rows)
        return {"detail": rows, "trace_query_id": trace_query_id,
                "pagination": {"page": page, "page_size": page_size, "total_count": total,
                               "total_pages": -(-total // page_size) if total else 0}}

    def keep(self, holder: str, domains) -> None:
        """Give the detail keys of ``holder``'s result (rows, orderings, per-CID records) a fresh
        full TTL: a job answered from that result reads them (:mod:`tracebus.jobs.reuse`)."""
        keys = [self.keys.rows(holder), *(self.keys.order(holder, k) for k in detailrows.SORT_KEYS),
                *(self.keys.cids(holder, d) for d in domains)]
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.expire(key, self.store.settings.job_ttl_s)
        pipe.execute()

    def _walk(self, job_id: str, sort_by: str, descending: bool, filters) -> Iterator[dict]:
        """The visible rows of ``job_id``'s detail in the order of ``sort_by`` (the keys of the
        job that ran it, for a job answered from a reused result)."""
        data = self.store.data_id(job_id)
        key = self.keys.order(data, sort_by)
        n = self.redis.strlen(key) // 4
        starts = range(n - _WINDOW, -_WINDOW, -_WINDOW) if descending else range(0, n, _WINDOW)
        for start in starts:
            lo = max(start, 0)
            ids = array("I")
            ids.frombytes(self.redis.getrange(key, lo * 4, (start + _WINDOW) * 4 - 1))
            if descending:
                ids.reverse()
            if not ids:
                continue
            for raw in self.redis.hmget(self.keys.rows(data), [str(i) for i in ids]):
                if raw is None:
                    raise CacheExpired(f"the MSD detail of job {job_id} expired while being read")
                stored = unpack(raw)
                row = detailrows.visible(stored, *filters)
                if row is not None:
                    if "_n" in stored:
                        row["_n"] = stored["_n"]
                    yield row

    def _expand(self, job_id: str, app: dict, rows: list[dict]) -> list[dict]:
        """Fill UPSTREAM_MACHINES / UPSTREAM_MATERIALS of backward rows from their nodes'
        per-CID records: one HMGET per domain for the rows given (O(rows x lineage depth))."""
        nodes = sorted({n for r in rows for n in r.get("_n", ())})
        found: dict[str, list] = {}
        data = self.store.data_id(job_id) if nodes else job_id
        for domain in app["msd"]["domains"] if nodes else ():
            values = self.redis.hmget(self.keys.cids(data, domain), nodes)
            for node, raw in zip(nodes, values):
                if raw is not None:
                    found.setdefault(node, []).append(unpack(raw))
        for row in rows:
            members = row.pop("_n", None)
            if members is not None and "UPSTREAM_MACHINES" in row:
                row.update(detailrows.upstream_lists([r for n in members for r in found.get(n, ())]))
        return rows

    def export_csv(self, trace_query_id: str, loss=None, user: str | None = None) -> Iterator[str]:
        """The CSV export (BOM, header, every visible row by defect rate, highest first), streamed.

        Raises:
            CacheExpired, JobNotComplete: checked before the first line is returned.
        """
        job_id, app = self.job_of(trace_query_id, user)
        forward = app["msd"]["direction"] == "forward"
        return self._csv(job_id, FORWARD_CSV if forward else BACKWARD_CSV, (_set(loss), None, None))

    def _csv(self, job_id: str, columns, filters) -> Iterator[str]:
        """No UPSTREAM_MACHINES / UPSTREAM_MATERIALS among the columns: rows are not expanded."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\r\n")
        writer.writerow([label for _, label in columns])
        yield "\ufeff" + _drain(out)
        names = [c for c, _ in columns]
        for n, row in enumerate(self._walk(job_id, DEFAULT_SORT, True, filters), 1):
            writer.writerow([_cell(row.get(c)) for c in names])
            if n % _WINDOW == 0:
                yield _drain(out)
        yield _drain(out)


def _drain(out: io.StringIO) -> str:
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    return text


def _cell(value) -> str:
    if value is None:
        return ""
    return neutral(value) if isinstance(value, str) else str(value)  # text only: -5 is no formula


def _set(values) -> frozenset | None:
    if not values:
        return None
    if isinstance(values, str):
        values = values.split(",")
    out = frozenset(v.strip() for v in values if isinstance(v, str) and v.strip())
    return out or None


def _check(page: int, page_size: int, sort_by: str | None, order: str | None) -> tuple[str, bool]:
    """The page's arguments, checked by their declarations (:mod:`.detailquery`): ``(sort key, descending)``."""
    PAGE.check(page, {})
    PAGE_SIZE.check(page_size, {})
    return SORT_BY.check(sort_by, {}), ORDER.check(order, {}) == "desc"
