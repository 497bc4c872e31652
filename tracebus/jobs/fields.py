"""Request declarations: each field's type, limits and messages, written once.

A request is a :class:`Shape` of fields; each field kind knows how to check a value (raising
:class:`~tracebus.errors.InvalidParams` with the message its declaration carries) and how to
describe itself as JSON Schema, so the validation and the OpenAPI request schema come from
the same declaration. Bounds that come from settings (the CID cap) are named (``max_items=
"cid_limit"``) and given at check and schema time as ``limits``.

Messages are ``str.format`` templates over ``name``, ``value`` (the offending value; a string
is cut to 80 characters, so a message never echoes a whole body), ``type`` (the type name of
a value that is not what was asked), ``max``, ``count``, ``limit`` and ``choices``.

Three readings of a declaration's fields: a JSON body (:class:`Shape`), a query kind's
parameters as the original reads them (:class:`Params`: null, "" and [] are not given), and a
query string (:class:`Query`: the API hands it the values of each name; its OpenAPI parameters
come from the same fields, so no bound or enum is written twice).

What a declaration cannot state (rules across fields: a date mode that needs dates, domains
allowed by the profile) stays in the request's own code, which reads its fields and limits
from here.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from tracebus.errors import InvalidParams

Limits = Mapping[str, int]


def _fail(template: str, error: type = InvalidParams, cut: int = 80, **values) -> InvalidParams:
    if isinstance(values.get("value"), str):
        values["value"] = values["value"][:cut]
    return error(template.format(**values))


@dataclass(frozen=True)
class Field:
    """What every field declares.

    Attributes:
        name(str): its key in the body.
        missing(str | None): the message when the key is absent; None: it may be left out
            (then :attr:`default` is checked in its place).
        required(bool): the schema lists it as required (implied by ``missing``; set alone
            when the field's own check refuses its absence).
        default: the value of an absent key.
        description(str | Callable[[], str]): for the schema; a callable is asked when the schema
            is written (a text composed from what registers after the field is declared).
        error(type): the error its messages are raised as (an :class:`InvalidParams`).
    """

    name: str
    missing: str | None = None
    required: bool = False
    default: Any = None
    description: str | Callable[[], str] = ""
    error: type = InvalidParams

    many = False  # a query string's field reads the last value of its name (:class:`Words`: every one)
    media = None  # a query parameter that is a document of this media type (:class:`Json`)

    def check(self, value: Any, limits: Limits) -> Any:
        return value

    def schema(self, limits: Limits) -> dict:
        return self._described({})

    def query_schema(self, limits: Limits) -> dict:
        """Its schema as a query parameter (a query string has no null, and "" is not given)."""
        return self.schema(limits)

    def text(self) -> str:
        """Its :attr:`description`, as the schema states it now."""
        return self.description() if callable(self.description) else self.description

    def _described(self, schema: dict) -> dict:
        text = self.text()
        return {**schema, "description": text} if text else schema


@dataclass(frozen=True)
class Text(Field):
    """A string.

    Attributes:
        invalid(str): the message for a value that is not a string (or is empty, with ``nonempty``).
        nullable(bool): null is accepted (as :attr:`default`); with ``nonempty`` False, so is "".
        nonempty(bool): "" is refused.
        enum(tuple[str, ...]): the values the schema lists (checked by the request's own code).
        max_length(int | None): the longest accepted (refused with ``invalid`` too, ``max``).
    """

    invalid: str = "{name} must be a string"
    nullable: bool = False
    nonempty: bool = True
    enum: tuple[str, ...] = ()
    max_length: int | None = None

    def check(self, value, limits):
        if value is None and self.nullable:
            return self.default
        if (not isinstance(value, str) or (self.nonempty and not value)
                or (self.max_length is not None and len(value) > self.max_length)):
            raise _fail(self.invalid, self.error, name=self.name, value=value, type=type(value).__name__,
                        max=self.max_length)
        return value if value or not self.nullable else self.default

    def schema(self, limits):
        out: dict = {"type": ["string", "null"] if self.nullable else "string"}
        if self.enum:
            out["enum"] = list(self.enum) + ([None] if self.nullable else [])
        if self.max_length is not None:
            out["maxLength"] = self.max_length
        return self._described(out)

    def query_schema(self, limits):
        out = {**self.schema(limits), "type": "string"}
        if "enum" in out:
            out["enum"] = [v for v in out["enum"] if v is not None]
        return out


@dataclass(frozen=True)
class Flag(Field):
    """true or false (nothing else reads as either).

    Attributes:
        invalid(str): the message for any other value.
        words(bool): a query string's flag: the words of :data:`TRUE_WORDS` and :data:`FALSE_WORDS`
            are read as true and false, a blank one (``?follow``, ``?follow=``) as true (falcon's
            ``blank_as_true``), absent is :attr:`default` (stated by the schema).
    """

    default: Any = False
    invalid: str = "{name} must be true or false"
    words: bool = False

    def check(self, value, limits):
        if self.words and isinstance(value, str):  # a query string's word (falcon's, any other: refused)
            value = True if value in TRUE_WORDS or value == "" else False if value in FALSE_WORDS else value
        elif self.words and value is None:
            return self.default
        if value is not True and value is not False:
            raise _fail(self.invalid, self.error, name=self.name, value=value)
        return value

    def schema(self, limits):
        return self._described({"type": "boolean", "default": self.default} if self.words else {"type": "boolean"})


#: The words a query string's flag is read as (falcon's ``get_param_as_bool``'s).
TRUE_WORDS = ("true", "True", "t", "yes", "y", "1", "on")
FALSE_WORDS = ("false", "False", "f", "no", "n", "0", "off")


@dataclass(frozen=True)
class Tokens(Field):
    """A list of 1 to ``max_items`` strings of the form ``pattern`` (taken as they are: no
    stripping), de-duplicated with their order kept; ``invalid`` is the message for any other value.

    ``pattern`` is written for both Python's ``re.fullmatch`` and JSON Schema (``^...$``, no
    class whose meaning differs between them, such as ``\\d``).
    """

    pattern: str = ""
    max_items: int = 1
    invalid: str = "{name} must be a list of 1 to {max} items"
    nullable: bool = False  # null reads as absent (the request's code reads the field only when given)

    def check(self, value, limits):
        if (not isinstance(value, list) or not value or len(value) > self.max_items
                or not all(isinstance(v, str) and re.fullmatch(self.pattern, v) for v in value)):
            raise _fail(self.invalid, self.error, name=self.name, max=self.max_items)
        return list(dict.fromkeys(value))

    def schema(self, limits):
        # Python's re (a Python validator's) lets ``$`` match before a final newline; fullmatch does not.
        item = {"type": "string", "pattern": self.pattern, "not": {"pattern": "\n"}}
        return self._described({"type": ["array", "null"] if self.nullable else "array", "items": item,
                                "minItems": 1, "maxItems": self.max_items})


@dataclass(frozen=True)
class Choice(Field):
    """One of ``choices``.

    Attributes:
        invalid(str): the message for any other value.
        lenient(bool): the value is read as ``str(value or default).strip() or default`` (the
            original's reading: a number or a padded word is read as text, a blank one as the
            default); else it must be one of the
            choices exactly, and null or "" mean :attr:`default` (when it has one; without one, a
            field neither ``required`` nor ``missing`` reads null as None).
        casefold(bool): a choice in any case is that choice (written in lower case; the
            message shows the value in lower case too).
        echo(int): the most characters of a refused string the message shows.
    """

    choices: tuple[str, ...] = ()
    invalid: str = "{name} must be one of {choices}, not {value!r}"
    lenient: bool = False
    casefold: bool = False
    echo: int = 80

    def check(self, value, limits):
        if self.lenient:
            value = str(value or self.default or "").strip() or (self.default or "")
        elif (value is None or value == "") and self.default is not None:
            return self.default
        elif value is None and not (self.required or self.missing):  # optional without a default
            return None
        if self.casefold and isinstance(value, str):
            value = value.lower()
        if not isinstance(value, str) or value not in self.choices:
            raise _fail(self.invalid, self.error, cut=self.echo, name=self.name, value=value,
                        choices=", ".join(self.choices))
        return value

    def schema(self, limits):
        out: dict = {"type": "string", "enum": list(self.choices)}
        if self.casefold:  # any case of a choice, or blank (the default)
            either = "|".join("".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)
                              for word in self.choices)
            return self._described({"type": "string", "pattern": f"^({either})?$"})
        if self.lenient:
            return self._described({**out, "default": self.default} if self.default else out)
        if self.default is None:
            return self._described(out)
        return self._described({"enum": [*self.choices, "", None]})

    def query_schema(self, limits):
        if self.lenient or self.casefold or self.default is None:
            return self.schema(limits)
        return self._described({"type": "string", "enum": list(self.choices), "default": self.default})


@dataclass(frozen=True)
class Custom(Field):
    """A field checked by a function of the request's own code, described by ``json``."""

    check_value: Callable[[Any], Any] | None = None
    json: Mapping[str, Any] = field(default_factory=dict)

    def check(self, value, limits):
        return value if self.check_value is None else self.check_value(value)

    def schema(self, limits):
        return self._described(dict(self.json))


@dataclass(frozen=True)
class Int(Field):
    """An integer from ``minimum`` to ``maximum``; a query string's text is read as its number
    (``int()``: spaces around it, a sign and ``_`` between digits too); absent, null or "" is
    :attr:`default`.

    Attributes:
        maximum(int | str): the largest accepted, or the name of a limit (given at check and
            schema time, e.g. from settings).
        lenient(bool): the original's page parameters: a value that is not a number (or is 0) is
            :attr:`default`, and one out of range is clamped into it; nothing is refused.
        not_int, too_small, too_big(str): the messages (``value``, ``min``, ``max``); by default
            falcon's words for a query parameter (what its ``get_param_as_int`` answered).
    """

    minimum: int = 0
    maximum: int | str = 0
    lenient: bool = False
    not_int: str = 'The "{name}" parameter is invalid. The value must be an integer.'
    too_small: str = 'The "{name}" parameter is invalid. The value must be at least {min}'
    too_big: str = 'The "{name}" parameter is invalid. The value may not exceed {max}'

    def top(self, limits: Limits) -> int:
        """The largest accepted."""
        return limits[self.maximum] if isinstance(self.maximum, str) else self.maximum

    def check(self, value, limits):
        top = self.top(limits)
        if self.lenient:
            try:
                number = int(value) if value else self.default
            except (TypeError, ValueError):
                number = self.default
            return min(max(number, self.minimum), top)
        if value is None or value == "":
            return self.default
        try:
            if isinstance(value, (bool, float)):
                raise ValueError
            number = int(value)
        except (TypeError, ValueError):
            raise _fail(self.not_int, self.error, name=self.name, value=value) from None
        if number < self.minimum or number > top:
            template = self.too_small if number < self.minimum else self.too_big
            raise _fail(template, self.error, name=self.name, value=number, min=self.minimum, max=top)
        return number

    def schema(self, limits):
        top = self.top(limits)
        if self.lenient:
            return {"type": "integer", "description": self.text() or
                    f"{self.minimum} to {top} (clamped; not a number: {self.default})"}
        out: dict = {"type": "integer", "minimum": self.minimum, "maximum": top}
        if self.default is not None:
            out["default"] = self.default
        return self._described(out)


@dataclass(frozen=True)
class Day(Field):
    """A day, ``YYYY-MM-DD`` (ten characters, a real date before 9999-12-31: a window ends the
    day after its last); the messages are the original's (``reason``: why the text is not a date)."""

    invalid: str = "日期格式錯誤: {name} must be a YYYY-MM-DD string"
    not_a_day: str = "日期格式錯誤: {reason}"
    too_late: str = "日期格式錯誤: {name} must be before 9999-12-31"

    def check(self, value, limits):
        if not isinstance(value, str) or len(value) != 10:
            raise _fail(self.invalid, self.error, name=self.name, value=value)
        try:
            day = datetime.datetime.strptime(value, "%Y-%m-%d").date()
        except ValueError as e:
            raise _fail(self.not_a_day, self.error, name=self.name, reason=e) from None
        if day == datetime.date.max:
            raise _fail(self.too_late, self.error, name=self.name, value=value)
        return value

    def schema(self, limits):
        return {"type": "string", "description": self.text() or "YYYY-MM-DD"}


@dataclass(frozen=True)
class Texts(Field):
    """A list of strings checked as sent (its count, each string's length), then stripped and
    de-duplicated with their order kept (blanks dropped).

    Attributes:
        max_items(int): the most strings sent (``too_many``: ``count``, ``max``).
        max_length(int): the longest string sent (``too_long``: ``count``, its length).
        empty(str | None): the message when a use of the list needs one value and none is left
            (a statement that reads it; the request's code raises it); with :attr:`missing` the
            list is required and an empty one refused with that.
    """

    default: Any = ()
    max_items: int = 20_000
    max_length: int = 128
    not_list: str = "{name} must be a list of strings"
    too_many: str = "{name} has {count} values; the limit is {max}"
    too_long: str = "{name} has a value of {count} characters; the limit is {max}"
    empty: str | None = None

    def check(self, value, limits):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _fail(self.not_list, self.error, name=self.name)
        if len(value) > self.max_items:
            raise _fail(self.too_many, self.error, name=self.name, count=len(value), max=self.max_items)
        longest = max(map(len, value), default=0)
        if longest > self.max_length:
            raise _fail(self.too_long, self.error, name=self.name, count=longest, max=self.max_length)
        cleaned = list(dict.fromkeys(v.strip() for v in value if v.strip()))
        if not cleaned and self.missing is not None:
            raise _fail(self.missing, self.error, name=self.name)
        return cleaned

    def schema(self, limits):
        return self._described({"type": "array", "items": {"type": "string", "maxLength": self.max_length},
                                "maxItems": self.max_items})


@dataclass(frozen=True)
class Words(Field):
    """A query string's list: every value of the parameter, repeated (``name=a&name=b``) or under
    its ``aliases`` (``name[]``), each at most ``max_length`` characters as sent, split on commas,
    stripped, blanks dropped; None when nothing is left. The OpenAPI document lists each name."""

    aliases: tuple[str, ...] = ()
    max_length: int = 128
    too_long: str = "{name}: a value is longer than {max} characters"

    many = True  # read from every value of its names (:meth:`Query.read`)

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.aliases, self.name)

    def check(self, value, limits):
        values = [] if value is None else [value] if isinstance(value, str) else list(value)
        if any(len(str(v)) > self.max_length for v in values):
            raise _fail(self.too_long, self.error, name=self.name, max=self.max_length)
        return [w.strip() for v in values for w in str(v).split(",") if w.strip()] or None

    def schema(self, limits):
        return self._described({"type": "string", "maxLength": self.max_length})


@dataclass(frozen=True)
class Json(Custom):
    """A query parameter that is a URL-encoded JSON document, read by ``check_value`` (its own
    parser) and described by ``json`` (the OpenAPI parameter's ``content``)."""

    media = "application/json"


@dataclass(frozen=True)
class Strings(Field):
    """A list of strings, stripped and de-duplicated with their order kept (blanks dropped).

    Attributes:
        not_list(str): the message for a value that is not a list.
        not_string(str | None): the message when an item is not a string; None: such items are skipped.
        empty(str | None): the message when nothing is left; None: it may be empty.
        max_length(int | None): the longest item (after stripping), with ``too_long``.
        max_items(str | None): the name of the limit on the count, with ``too_many`` (``count``,
            ``limit``) raised as ``over_limit(message, count=, limit=)``.
        items(dict): what the schema says of each item beyond its length (an ``enum``).
        conditional(bool): the checks apply only in some cases (another field's value): the
            schema states the type alone.
    """

    not_list: str = "{name} must be a list of strings"
    not_string: str | None = None
    empty: str | None = None
    max_length: int | None = None
    too_long: str = "{name}: value longer than {max} characters: {value!r}"
    max_items: str | None = None
    too_many: str = "{name} count ({count}) exceeds limit ({limit})"
    over_limit: Callable[..., Exception] = InvalidParams
    items: Mapping[str, Any] = field(default_factory=dict)
    conditional: bool = False

    def check(self, value, limits):
        if not isinstance(value, (list, tuple)):
            raise _fail(self.not_list, name=self.name, type=type(value).__name__)
        # map/filter keep the per-item work in C: 114K CIDs are cleaned in a few ms.
        if self.not_string is not None and not all(issubclass(t, str) for t in set(map(type, value))):
            raise _fail(self.not_string, name=self.name)
        strings = value if self.not_string is not None else [v for v in value if isinstance(v, str)]
        out = list(dict.fromkeys(filter(None, map(str.strip, strings))))
        if self.max_length is not None and out and max(map(len, out)) > self.max_length:
            long = next(v for v in out if len(v) > self.max_length)
            raise _fail(self.too_long, name=self.name, max=self.max_length, value=long)
        if not out and self.empty is not None:
            raise _fail(self.empty, name=self.name)
        limit = limits.get(self.max_items) if self.max_items else None
        if limit is not None and len(out) > limit:
            raise self.over_limit(self.too_many.format(name=self.name, count=len(out), limit=limit),
                                  cid_count=len(out), limit=limit)
        return out

    def schema(self, limits):
        # What the check accepts: an item is stripped (a blank one is dropped) before its length
        # is checked, and without ``not_string`` an item that is not a string is skipped.
        item: dict = {"type": "string", **self.items}
        if self.conditional:
            return self._described({"type": "array", "items": item})
        if self.not_string is None:
            del item["type"]  # pattern applies to strings only: anything else is skipped
        if self.max_length is not None:
            item["pattern"] = _stripped_at_most(self.max_length)
        out: dict = {"type": "array", "items": item}
        if self.empty is not None:
            out["minItems"] = 1
            out["contains"] = {"type": "string", "pattern": r"\S"}  # one item left once blanks go
        if self.max_items and self.max_items in limits:
            out["maxItems"] = limits[self.max_items]
        return self._described(out)


def _stripped_at_most(n: int) -> str:
    """A pattern of the strings that are blank or, stripped, at most ``n`` characters long
    (``\\s`` and ``str.strip`` agree on what is whitespace)."""
    inner = r"\S" if n == 1 else rf"\S(?:[\s\S]{{0,{n - 2}}}\S)?"
    return rf"^\s*(?:{inner})?\s*$"


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
    fields: "Shape | None" = None

    def check(self, value, limits):
        value = {} if value is None else value  # absent or null; false, 0 or "" are not objects
        if not isinstance(value, Mapping):
            raise _fail(self.invalid, name=self.name, type=type(value).__name__)
        if self.max_json_bytes is not None:
            try:
                size = len(json.dumps(value, separators=(",", ":")))
            except (TypeError, ValueError):
                raise _fail(self.not_json, name=self.name) from None
            if size > self.max_json_bytes:  # they are stored with the job for its whole TTL
                raise _fail(self.too_big, name=self.name, count=size, max=self.max_json_bytes)
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
            raise _fail(self.malformed, start=start, end=end) from None
        if first > last:
            raise _fail(self.inverted, start=start, end=end)
        if last == datetime.date.max:  # a window ends the day after its last: 9999-12-31 has none
            raise InvalidParams(f"{self.end} must be before 9999-12-31, got {end!r}")
        days = (last - first).days
        if days > self.max_days:
            raise _fail(self.too_long, start=start, end=end, days=days, max=self.max_days)

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
                raise _fail(f.missing, name=f.name)
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
                    raise _fail(f.missing, f.error, name=f.name)
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

    A field reads the last value of its name (:class:`Words`: every value of its names); absent
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
                raise _fail(f.missing, f.error, name=f.name)
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
