"""Request declarations: the :class:`Field` every declared input is, and its single-value kinds.

A request is declared as fields (:mod:`tracebus.jobs.shapes` reads them as a body, a query
kind's parameters or a query string); each field kind knows how to check a value (raising
:class:`~tracebus.errors.InvalidParams` with the message its declaration carries) and how to
describe itself as JSON Schema, so the validation and the OpenAPI request schema come from
the same declaration. Bounds that come from settings (the CID cap) are named (``max_items=
"cid_limit"``) and given at check and schema time as ``limits``.

Messages are ``str.format`` templates over ``name``, ``value`` (the offending value; a string
is cut to 80 characters, so a message never echoes a whole body), ``type`` (the type name of
a value that is not what was asked), ``max``, ``count``, ``limit`` and ``choices``.

Here: the base :class:`Field` and the kinds of one value (text, flag, choice, integer, day, a
value the request's own code checks). The kinds of a list of values are in
:mod:`tracebus.jobs.list_fields`; an object of fields (:class:`~tracebus.jobs.shapes.Obj`) and
the readings of a declaration in :mod:`tracebus.jobs.shapes`.

What a declaration cannot state (rules across fields: a date mode that needs dates, domains
allowed by the profile) stays in the request's own code, which reads its fields and limits
from here.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from tracebus.errors import InvalidParams

Limits = Mapping[str, int]


def fail(template: str, error: type = InvalidParams, cut: int = 80, **values) -> InvalidParams:
    """The error of a declared message: ``template`` formatted with ``values`` (a string value
    cut to ``cut`` characters), as ``error``."""
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

    many = False  # a query string's field reads the last value of its name (:class:`~tracebus.jobs.list_fields.Words`: every one)
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
            raise fail(self.invalid, self.error, name=self.name, value=value, type=type(value).__name__,
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
            raise fail(self.invalid, self.error, name=self.name, value=value)
        return value

    def schema(self, limits):
        return self._described({"type": "boolean", "default": self.default} if self.words else {"type": "boolean"})


#: The words a query string's flag is read as (falcon's ``get_param_as_bool``'s).
TRUE_WORDS = ("true", "True", "t", "yes", "y", "1", "on")
FALSE_WORDS = ("false", "False", "f", "no", "n", "0", "off")


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
            raise fail(self.invalid, self.error, cut=self.echo, name=self.name, value=value,
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
            raise fail(self.not_int, self.error, name=self.name, value=value) from None
        if number < self.minimum or number > top:
            template = self.too_small if number < self.minimum else self.too_big
            raise fail(template, self.error, name=self.name, value=number, min=self.minimum, max=top)
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
            raise fail(self.invalid, self.error, name=self.name, value=value)
        try:
            day = datetime.datetime.strptime(value, "%Y-%m-%d").date()
        except ValueError as e:
            raise fail(self.not_a_day, self.error, name=self.name, reason=e) from None
        if day == datetime.date.max:
            raise fail(self.too_late, self.error, name=self.name, value=value)
        return value

    def schema(self, limits):
        return {"type": "string", "description": self.text() or "YYYY-MM-DD"}


@dataclass(frozen=True)
class Json(Custom):
    """A query parameter that is a URL-encoded JSON document, read by ``check_value`` (its own
    parser) and described by ``json`` (the OpenAPI parameter's ``content``)."""

    media = "application/json"
