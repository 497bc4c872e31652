"""Request declarations read whole: a body, a nested object, a query kind's parameters, a query string.

A declaration's fields (:mod:`tracebus.jobs.fields`, :mod:`tracebus.jobs.list_fields`) are read
three ways: a JSON body (:class:`Shape`, and :class:`Obj` for an object within it, with its own
date ranges as :class:`DateSpan`), a query kind's parameters as the original reads them
(:class:`Params`: null, "" and [] are not given), and a query string (:class:`Query`: the API
hands it the values of each name; its OpenAPI parameters come from the same fields, so no
bound or enum is written twice). Each checks the fields in order, raising the declared message
of the first that is wrong, and writes the JSON Schema (or OpenAPI parameters) of the whole.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Field, Int, Limits, fail


@dataclass(frozen=True)
class Obj(Field):
    """A JSON object (null reads as {}).

    Attributes:
        invalid(str): the message for anything else.
        max_json_bytes(int | None): the largest accepted, as compact JSON, with ``too_big`` (``count``, ``max``).
        fields(Shape | None): its own declared fields (the schema lists them; the request's code
            checks those that apply).
    """

    invalid: str = "{name} must be an object"
    max_json_bytes: int | None = None
    too_big: str = "{name} is {count} bytes of JSON; the limit is {max}"
    not_json: str = "{name} must be JSON-serialisable"
    fields: Shape | None = None

    def check(self, value, limits):
        value = {} if value is None else value  # absent or null; false, 0 or "" are not objects
        if not isinstance(value, Mapping):
            raise fail(self.invalid, name=self.name, type=type(value).__name__)
        if self.max_json_bytes is not None:
            try:
                size = len(json.dumps(value, separators=(",", ":")))
            except (TypeError, ValueError):
                raise fail(self.not_json, name=self.name) from None
            if size > self.max_json_bytes:  # they are stored with the job for its whole TTL
                raise fail(self.too_big, name=self.name, count=size, max=self.max_json_bytes)
        return dict(value)

    def schema(self, limits):
        out: dict = {"type": ["object", "null"]}
        if self.fields is not None:
            out["properties"] = self.fields.properties(limits)
        return self._described(out)


@dataclass(frozen=True)
class DateSpan:
    """A date range given as ``start_date`` / ``end_date`` (or, with ``pair``, as a two-item
    list under that key), ``YYYY-MM-DD``, in order, at most ``max_days`` apart.

    Attributes:
        missing(str): the message when a date is absent.
        malformed(str): the message for a date that is not ``YYYY-MM-DD`` (``start``, ``end``).
        inverted(str): the message when start is after end.
        too_long(str): the message past ``max_days`` (``start``, ``end``, ``days``, ``max``).
    """

    max_days: int
    missing: str = "start_date and end_date are required"
    malformed: str = "start_date and end_date must be YYYY-MM-DD, got {start!r} and {end!r}"
    inverted: str = "start_date {start} is after end_date {end}"
    too_long: str = "the date range {start} .. {end} spans {days} days; at most {max} are allowed"
    pair: str | None = None
    start: str = "start_date"
    end: str = "end_date"

    def dates(self, params: Mapping) -> tuple[str, str]:
        """The two dates as given (stripped; the pair first when it has two non-empty items)."""
        pair = params.get(self.pair) if self.pair else None
        if isinstance(pair, list) and len(pair) == 2 and all(pair):
            start, end = (str(v).strip() for v in pair)
        else:
            start, end = (str(params.get(k) or "").strip() for k in (self.start, self.end))
        if not start or not end:
            raise InvalidParams(self.missing)
        return start, end

    def check_span(self, start: Any, end: Any) -> None:
        """Check two dates: their form, their order and their distance."""
        try:
            first, last = datetime.date.fromisoformat(str(start)), datetime.date.fromisoformat(str(end))
        except ValueError:
            raise fail(self.malformed, start=start, end=end) from None
        if first > last:
            raise fail(self.inverted, start=start, end=end)
        if last == datetime.date.max:  # a window ends the day after its last: 9999-12-31 has none
            raise InvalidParams(f"{self.end} must be before 9999-12-31, got {end!r}")
        days = (last - first).days
        if days > self.max_days:
            raise fail(self.too_long, start=start, end=end, days=days, max=self.max_days)

    def check(self, params: Mapping) -> tuple[str, str]:
        """The range of ``params``, checked."""
        start, end = self.dates(params)
        self.check_span(start, end)
        return start, end

    def properties(self) -> dict:
        """What the schema says of its keys (the span itself is a rule across them)."""
        day = {"type": "string", "description": f"YYYY-MM-DD; at most {self.max_days} days from start to end"}
        out = {self.start: day, self.end: day}
        if self.pair:
            out[self.pair] = {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2,
                              "description": f"[{self.start}, {self.end}] (read first)"}
        return out


@dataclass(frozen=True)
class Shape:
    """A request body (or a nested object) as its declared fields.

    Attributes:
        fields(tuple[Field, ...]): in the order they are checked.
        not_object(str): the message for a body that is not a JSON object.
        spans(tuple[DateSpan, ...]): date ranges among its keys (schema only: the request's
            code decides when they apply).
        description(str): for the schema.
        rules(dict): what the schema says of a rule across its fields (``oneOf``: one field or
            another), written beside the fields; the request's code checks it.
    """

    fields: tuple[Field, ...]
    not_object: str = "request body must be a JSON object"
    spans: tuple[DateSpan, ...] = ()
    description: str = ""
    rules: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def value(self, body: Mapping, name: str, limits: Limits = {}) -> Any:
        """Field ``name`` of ``body``, checked (absent: its default)."""
        f = self[name]
        return f.check(body.get(name, f.default), limits)

    def check(self, body: Any, limits: Limits = {}) -> dict:
        """Every field of ``body``, checked: the absent required ones first, then each in order.

        Returns:
            dict: field name -> checked value (the body's other keys are left out).

        Raises:
            InvalidParams: with the declared message of the first field that is wrong.
        """
        if not isinstance(body, Mapping):
            raise InvalidParams(self.not_object)
        for f in self.fields:
            if f.missing is not None and f.name not in body:
                raise fail(f.missing, name=f.name)
        return {f.name: f.check(body.get(f.name, f.default), limits) for f in self.fields}

    def properties(self, limits: Limits = {}) -> dict:
        out = {}
        for span in self.spans:
            out.update(span.properties())
        out.update({f.name: f.schema(limits) for f in self.fields})
        return out

    def schema(self, limits: Limits = {}) -> dict:
        """The JSON Schema of the body."""
        out: dict = {"type": "object"}
        required = [f.name for f in self.fields if f.missing is not None or f.required]
        if required:
            out["required"] = required
        out["properties"] = self.properties(limits)
        out.update(self.rules)
        if self.description:
            out["description"] = self.description
        return out


def blank(value: Any) -> bool:
    """null, "" or [] (a query kind's and a query string's reading of "not given")."""
    return value is None or (isinstance(value, (str, list)) and not value)


@dataclass(frozen=True)
class Params:
    """A query kind's parameters (the original's reading): each field in order, a blank value
    (:func:`blank`) as absent: refused with the field's ``missing`` message, else its default.

    Attributes:
        fields(tuple[Field, ...]): in the order they are checked.
        not_object(str): the message for a body that is not a non-empty JSON object.
    """

    fields: tuple[Field, ...]
    not_object: str = "request body must be a non-empty JSON object"

    def __getitem__(self, name: str) -> Field:
        return Shape(self.fields)[name]

    def check(self, body: Any, limits: Limits = {}) -> dict:
        """Every field of ``body``, checked, in order (the body's other keys are left out).

        Raises:
            InvalidParams: with the declared message of the first field that is wrong.
        """
        if not isinstance(body, Mapping) or not body:
            raise InvalidParams(self.not_object)
        out = {}
        for f in self.fields:
            value = body.get(f.name)
            if blank(value) and not isinstance(f, Int):
                if f.missing is not None:
                    raise fail(f.missing, f.error, name=f.name)
                out[f.name] = list(f.default) if isinstance(f.default, (list, tuple)) else f.default
            else:
                out[f.name] = f.check(value, limits)
        return out

    def properties(self, limits: Limits = {}) -> dict:
        return {f.name: f.schema(limits) for f in self.fields}

    def required(self) -> list[str]:
        return [f.name for f in self.fields if f.missing is not None]


@dataclass(frozen=True)
class Query:
    """A query string's parameters, declared once: :meth:`read` checks them (the API gives it
    the values of a name), :meth:`parameters` is their OpenAPI description.

    A field reads the last value of its name (:class:`~tracebus.jobs.list_fields.Words`: every value of its names); absent
    or "" is refused with its ``missing`` message when it has one (after stripping), else it is
    the field's to read (:class:`Int`: its default).
    """

    fields: tuple[Field, ...]

    def __getitem__(self, name: str) -> Field:
        return Shape(self.fields)[name]

    def read(self, values: Callable[[str], list[str]], limits: Limits = {}) -> dict:
        """Every field, checked, in order.

        Args:
            values: the values of a name in the query string, in order (``[]``: absent).

        Raises:
            InvalidParams: with the declared message of the first field that is wrong.
        """
        out = {}
        for f in self.fields:
            if f.many:
                out[f.name] = f.check([v for n in f.names for v in values(n)], limits)
                continue
            given = values(f.name)
            value = given[-1] if given else None
            if f.missing is not None and not (value or "").strip():
                raise fail(f.missing, f.error, name=f.name)
            out[f.name] = f.check(value, limits)
        return out

    def parameters(self, limits: Limits = {}) -> list[dict]:
        """The OpenAPI parameters (``in: query``), one per name, in the declared order."""
        out = []
        for f in self.fields:
            schema = f.query_schema(limits)
            description = schema.pop("description", "")
            shown = {"content": {f.media: {"schema": schema}}} if f.media else {"schema": schema}
            for name in (f.names if f.many else (f.name,)):
                out.append({"name": name, "in": "query", "required": f.missing is not None or f.required,
                            **shown, "description": description})
        return out
