"""Query jobs as a declared kind: a statement per dialect, its parameters, how it splits into units.

The original dashboard runs a dozen kinds of report query as RQ jobs, each a service function
around one or more SQL files. Here such a kind is a declaration (:class:`QueryKind`, registered
with :func:`declare`), and everything else is shared: parameter checks, the plan of units,
the unit a trace worker runs, the synchronous answer in the API process, the result document,
the generic job contract (``/api/job/{id}?prefix=<kind>``), ``POST /api/v1/jobs {kind, params}``
and the typed export. docs/porting.md moves one of the original's job types this way.

A kind names:

* ``statements``: one :class:`Statement` per value of its ``selector`` parameter (the original's
  ``query_type``): a function of the :class:`~tracebus.trace.sources.queries.Dialect` and the
  number of IDs that writes the SQL once for SQLite and Oracle (binds ``:w0``/``:w1``: the
  unit's window as ``YYYY-MM-DD HH:MM:SS`` text, ``:p0..:pN``: its IDs), its columns with
  their types (:data:`tracebus.jobs.export.TYPES`) and the order of its result;
* ``params``: its request's fields, declared with :mod:`tracebus.jobs.fields` (:class:`~tracebus.jobs.fields.Day`,
  :class:`~tracebus.jobs.list_fields.Texts`, :class:`~tracebus.jobs.fields.Choice`, :class:`~tracebus.jobs.fields.Int`
  (``lenient``)), read as the original does (:class:`~tracebus.jobs.shapes.Params`: null, "" or [] is
  not given) and checked with its messages; the OpenAPI request schema is derived from them;
* the split: ID lists of at most :data:`~tracebus.trace.sources.IN_LIMIT` (``ids``) and/or date
  windows of ``window_days`` (as the original's unified jobs split reject history in 10-day
  windows); one unit per (window, ID list), a section per statement;
* ``async_days``: a request whose span is at least this many days is a job (202), a shorter one
  is answered now (the original's query-cost policy: 30 days).

What a request may cost is bounded before anything runs or is stored (:meth:`QueryKind.cost`,
:func:`bound`): its units (windows x ID lists), the binds of one statement (IDs and narrowing
values), the bytes of its stored parameters, and each text's length; a request over one is
refused with the limit named (:class:`~tracebus.trace.errors.CostLimitExceeded`, a 413). The
parameters a statement does not read are dropped by :meth:`QueryKind.check`, so they are
neither stored nor part of the single-flight fingerprint.

What a kind's units read and what it answers (now, whole; or a job's result, streamed from its
units' sorted rows merged) is :mod:`tracebus.trace.query.answers`.
"""

from __future__ import annotations

import datetime
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable, Iterator, Mapping

import orjson

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Field
from tracebus.jobs.list_fields import Texts
from tracebus.jobs.shapes import Params
from tracebus.jobs.spec import JobSpec, fingerprint_of
from tracebus.trace.errors import CostLimitExceeded
from tracebus.trace.sources import IN_LIMIT
from tracebus.trace.sources.queries import Dialect

#: The actor that runs every query unit (the query job kind, :mod:`tracebus.trace.query.kind`, on the trace workers).
ACTOR_NAME = "query_unit"
#: Text of a window bound (the sources compare dates as this text).
STAMP = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True)
class Statement:
    """One named statement of a kind.

    Attributes:
        sql(Callable[[Dialect, int], str]): the SQL for a dialect and an ID count.
        columns(tuple[tuple[str, str], ...]): (name, type) of each selected column, in order.
        order(tuple[tuple[str, bool], ...]): (column, descending) of the result, as the SQL's
            ORDER BY (NULLs last ascending, first descending, as Oracle).
        ids(str): the ``ids`` parameter the statement's ``:p`` binds read.
        post(Callable[[list[dict], dict], tuple[list[dict], dict]] | None): what the original does
            to the ordered rows in Python (aggregate, page): ``(rows, extra fields of the answer)``.
        unported(tuple[str, ...]): parameters of the original this statement does not take yet:
            a request that gives one is a 400, not an answer that ignores it.
        split(bool): False for a statement that is not additive over windows and ID lists (a
            DISTINCT or GROUP BY across them): it runs as one unit over the whole span with every
            ID (:func:`in_list` ORs lists of 1,000).
        narrow(str): an optional ``texts`` parameter that, when given, narrows the rows: its
            values (each through ``narrow_value``) are bound as ``:n0 .. :nN`` and ``sql`` is
            called with their count as a third argument (0, or not called with it, when absent).
        reads(tuple[str, ...]): other parameters it reads (in ``post``); the kind's selector and
            dates, ``ids`` and ``narrow`` are read by every statement that names them.
        unit_order(tuple[tuple[str, bool], ...]): the order a unit sorts its rows in and the
            API merges them by, when ``stream_post`` needs another than ``order`` (it must
            give the rows ``post`` reads together next to each other).
        stream_post: ``post`` over the merged rows (dicts, in ``unit_order``) as an iterator:
            ``(the rows of the answer, as an iterator; a function returning the extra fields
            once those are consumed)``. Required with ``post``.
    """

    sql: Callable[[Dialect, int], str]
    columns: tuple[tuple[str, str], ...]
    order: tuple[tuple[str, bool], ...] = ()
    ids: str = ""
    post: Callable[[list[dict], dict], tuple[list[dict], dict]] | None = None
    unported: tuple[str, ...] = ()
    split: bool = True
    narrow: str = ""
    narrow_value: Callable[[str], str] = str
    reads: tuple[str, ...] = ()
    unit_order: tuple[tuple[str, bool], ...] = ()
    stream_post: Callable[[Iterator[dict], dict], tuple[Iterator[dict], Callable[[], dict]]] | None = None

    def __post_init__(self):
        if self.post is not None and self.stream_post is None:
            raise ValueError("a statement with post declares stream_post too (its job's result is streamed)")

    @property
    def merge_order(self) -> tuple[tuple[str, bool], ...]:
        """The order of a unit's stored rows (and of their merge)."""
        return self.unit_order or self.order

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def narrowing(self, params: dict) -> list[str]:
        """The values the request narrows the statement by (``[]``: not narrowed)."""
        return [self.narrow_value(v) for v in params.get(self.narrow) or []] if self.narrow else []

    def text(self, d: Dialect, n_ids: int, n_narrow: int = 0) -> str:
        """The SQL for a dialect, an ID count and a narrowing count."""
        return self.sql(d, n_ids, n_narrow) if n_narrow else self.sql(d, n_ids)


@dataclass(frozen=True)
class Http:
    """A kind's own ``POST`` route, declared with it: the API serves it (answered now under
    ``async_days``, else a job), rate-limits it and documents it from this and the kind alone
    (:meth:`tracebus.trace.query.kind.QueryJobKind.routes`).

    Attributes:
        path(str): the original's URL.
        bucket(str): its rate-limit bucket (a name of ``TRACEBUS_RATE_LIMITS``).
        limit(tuple[int, int]): the bucket's default, the original's: requests per seconds.
        title(str): what the route is, for its OpenAPI summary.
    """

    path: str
    bucket: str
    limit: tuple[int, int]
    title: str


@dataclass(frozen=True)
class QueryKind:
    """A declared query kind (see the module docstring); ``http``: its own route, if it has one
    (every kind is also served by ``POST /api/v1/jobs``)."""

    kind: str
    params: tuple[Field, ...]
    statements: Mapping[str, Statement]
    selector: str
    start: str = "start_date"
    end: str = "end_date"
    window_days: int = 10
    async_days: int = 30
    max_days: int = 730
    extra: Callable[[dict], dict] = field(default=lambda params: {})
    http: Http | None = None

    def check(self, body) -> dict:
        """The request's parameters, checked and normalised: only those the selected statement
        reads are kept (the rest, declared or not, are dropped).

        Raises:
            InvalidParams: with the original's message.
        """
        out = Params(self.params).check(body)
        name, st = self.statement(out)
        if st.ids and not out[st.ids]:  # the statement's IDs are required even if the kind's are not
            declared = Params(self.params)[st.ids]
            raise InvalidParams((declared.empty if isinstance(declared, Texts) else None) or declared.missing
                                or f"{st.ids} is required")
        given = [n for n in st.unported if out.get(n)]
        if given:
            raise InvalidParams(f"{', '.join(given)} with {self.selector} {name!r} is not ported to tracebus yet")
        start, end = out[self.start], out[self.end]
        if start and end:
            days = (_day(end) - _day(start)).days
            if days < 0:
                raise InvalidParams("結束日期不可早於起始日期")
            if days > self.max_days:
                raise InvalidParams(f"日期範圍不可超過 {self.max_days} 天")
        read = {self.selector, self.start, self.end, st.ids, st.narrow, *st.reads}
        return {k: v for k, v in out.items() if k in read}

    def cost(self, params: dict) -> tuple[int, int]:
        """``(units, binds of its largest statement)`` of checked parameters, counted without
        planning them."""
        _, st = self.statement(params)
        ids = len(params[st.ids]) if st.ids else 0
        narrowing = len(params.get(st.narrow) or ()) if st.narrow else 0
        if not st.split:
            return 1, 2 + ids + narrowing
        days = (_day(params[self.end]) - _day(params[self.start])).days + 1
        windows = -(-days // self.window_days)
        lists = -(-ids // IN_LIMIT) if st.ids else 1
        return windows * lists, 2 + min(ids, IN_LIMIT) + narrowing

    def schema(self) -> dict:
        """The JSON Schema of a request's parameters, from :attr:`params` (the rules across them,
        the span and the selector's ported values, are said in descriptions)."""
        declared = Params(self.params)
        props = declared.properties()
        props[self.end] = {**props[self.end],
                           "description": f"YYYY-MM-DD, at most {self.max_days} days after {self.start}"}
        props[self.selector] = {**props[self.selector], "description": "ported: " + ", ".join(self.statements)}
        for p in self.params:
            readers = [name for name, st in self.statements.items() if st.ids == p.name]
            if readers and p.missing is None:
                props[p.name]["description"] = f"required by {self.selector} {', '.join(readers)}"
            narrowed = [name for name, st in self.statements.items() if st.narrow == p.name]
            if narrowed:
                props[p.name]["description"] = f"optional: narrows {self.selector} {', '.join(narrowed)}"
        return {"type": "object", "required": declared.required(), "properties": props}

    def answer_schema(self) -> dict:
        """The JSON Schema of its answer (:func:`~tracebus.trace.query.answers.answer`; a job's result is the same document)."""
        string = {"type": "string"}
        return {"type": "object", "required": ["data", "total", "date_range"], "properties": {
            "data": {"type": "array", "items": {"type": "object"}}, "total": {"type": "integer"},
            "date_range": {"type": "object", "properties": {"start": string, "end": string}}}}

    def statement(self, params: dict) -> tuple[str, Statement]:
        """The statement the request selects.

        Raises:
            InvalidParams: a value of the selector that has no statement (not ported yet).
        """
        name = params[self.selector]
        if name not in self.statements:
            raise InvalidParams(f"{self.selector} {name!r} is not ported to tracebus yet; ported: "
                                f"{', '.join(self.statements)} (docs/porting.md)")
        return name, self.statements[name]

    def is_async(self, params: dict) -> bool:
        """A span of ``async_days`` or more (end - start, in days) is a job."""
        return (_day(params[self.end]) - _day(params[self.start])).days >= self.async_days

    def windows(self, params: dict) -> list[tuple[str, str]]:
        """``[start, end + 1 day)`` cut into windows of ``window_days`` days, as bind text."""
        first, stop = _day(params[self.start]), _day(params[self.end]) + datetime.timedelta(days=1)
        out, at = [], first
        while at < stop:
            nxt = min(at + datetime.timedelta(days=self.window_days), stop)
            out.append((at.strftime(STAMP), nxt.strftime(STAMP)))
            at = nxt
        return out

    def units(self, params: dict) -> list[list]:
        """One item per unit: ``[window start, window end, ID list index]`` (-1: every ID)."""
        _, st = self.statement(params)
        if not st.split:
            windows = self.windows(params)
            return [[windows[0][0], windows[-1][1], -1]]
        lists = -(-len(params[st.ids]) // IN_LIMIT) if st.ids else 1
        return [[w0, w1, i] for w0, w1 in self.windows(params) for i in range(lists)]

    def spec(self, params: dict, user: str, queue: str, result_key: str = "", fresh: bool = False) -> JobSpec:
        """The job of a checked request; ``result_key`` and ``fresh``: as the :class:`JobSpec`'s."""
        name, _ = self.statement(params)
        return JobSpec(kind=self.kind, user=user, sections=(name,), items=self.units(params), chunk_items=1,
                       queue=queue, actor_name=ACTOR_NAME, fingerprint=fingerprint_of(self.kind, params, user),
                       result_key=result_key, fresh=fresh, app={"query": self.kind, "params": params})


#: Every declared kind, by name (the job kind and the generic contract's prefix).
KINDS: dict[str, QueryKind] = {}


def declare(kind: QueryKind) -> QueryKind:
    """Register ``kind`` (once per name)."""
    if kind.kind in KINDS and KINDS[kind.kind] is not kind:
        raise ValueError(f"query kind {kind.kind!r} declared twice")
    KINDS[kind.kind] = kind
    return kind


#: The modules of this package that declare no kind (the machinery every kind shares).
MACHINERY = frozenset({"answers", "jobs", "kind"})


def declared() -> dict[str, QueryKind]:
    """Every declared kind: every other module of this package is imported here (each declares
    its kinds when imported), so a new kind is a new module and nothing else."""
    if not _FOUND:
        for module in pkgutil.iter_modules(__path__):
            if module.name not in MACHINERY and not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
        _FOUND.append(True)
    return KINDS


_FOUND: list[bool] = []


@dataclass(frozen=True)
class Limits:
    """What one request of a query kind may cost (the trace settings' ``TRACE_QUERY_*``)."""

    max_units: int
    max_binds: int
    max_params_bytes: int


def bound(kind: QueryKind, params: dict, limits: Limits) -> int:
    """The units of checked ``params``, within ``limits``.

    Raises:
        CostLimitExceeded: more units, binds in one statement, or stored bytes than allowed
            (the message names the limit and its setting).
    """
    units, binds = kind.cost(params)
    if units > limits.max_units:
        raise CostLimitExceeded(f"this request is {units} units of work (date windows of {kind.window_days} "
                                f"days x ID lists of {IN_LIMIT}); the limit is {limits.max_units} per job "
                                "(TRACE_QUERY_MAX_UNITS): shorten the span or send fewer IDs")
    if binds > limits.max_binds:
        raise CostLimitExceeded(f"this request binds {binds} values in one statement; the limit is "
                                f"{limits.max_binds} (TRACE_QUERY_MAX_BINDS): send fewer IDs or names")
    size = len(orjson.dumps(params))
    if size > limits.max_params_bytes:
        raise CostLimitExceeded(f"the parameters are {size} bytes as stored; the limit is "
                                f"{limits.max_params_bytes} (TRACE_QUERY_MAX_PARAMS_BYTES)")
    return units


def kind_of(name: object) -> QueryKind:
    """The declared kind ``name``.

    Raises:
        InvalidParams: no such kind.
    """
    declared()
    if not isinstance(name, str) or name not in KINDS:
        raise InvalidParams(f"kind must be one of {', '.join(sorted(KINDS))}")
    return KINDS[name]


def in_list(column: str, n_ids: int, prefix: str = "p") -> str:
    """``column`` in the binds ``:p0 .. :p<n-1>`` (``prefix`` instead of ``p``), as IN lists of
    at most 1,000 ORed (Oracle's limit per list)."""
    lists = [", ".join(f":{prefix}{i}" for i in range(at, min(at + IN_LIMIT, n_ids)))
             for at in range(0, n_ids, IN_LIMIT)]
    return "(" + " OR ".join(f"{column} IN ({binds})" for binds in lists) + ")" if lists else "1 = 0"


def _day(text: str) -> datetime.date:
    return datetime.datetime.strptime(text, "%Y-%m-%d").date()

