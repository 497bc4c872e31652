"""Request declarations: the field kinds whose value is a list of strings.

Each is a :class:`~tracebus.jobs.fields.Field` (checked and described as every field is):
:class:`Tokens` (ids of a fixed form), :class:`Texts` (a query kind's lists, checked as sent),
:class:`Strings` (a body's lists, cleaned, with a count limit from settings) and :class:`Words`
(a query string's repeated or comma-separated values).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from tracebus.errors import InvalidParams
from tracebus.jobs.fields import Field, fail


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
            raise fail(self.invalid, self.error, name=self.name, max=self.max_items)
        return list(dict.fromkeys(value))

    def schema(self, limits):
        # Python's re (a Python validator's) lets ``$`` match before a final newline; fullmatch does not.
        item = {"type": "string", "pattern": self.pattern, "not": {"pattern": "\n"}}
        return self._described({"type": ["array", "null"] if self.nullable else "array", "items": item,
                                "minItems": 1, "maxItems": self.max_items})


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
            raise fail(self.not_list, self.error, name=self.name)
        if len(value) > self.max_items:
            raise fail(self.too_many, self.error, name=self.name, count=len(value), max=self.max_items)
        longest = max(map(len, value), default=0)
        if longest > self.max_length:
            raise fail(self.too_long, self.error, name=self.name, count=longest, max=self.max_length)
        cleaned = list(dict.fromkeys(v.strip() for v in value if v.strip()))
        if not cleaned and self.missing is not None:
            raise fail(self.missing, self.error, name=self.name)
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

    many = True  # read from every value of its names (:meth:`~tracebus.jobs.shapes.Query.read`)

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.aliases, self.name)

    def check(self, value, limits):
        values = [] if value is None else [value] if isinstance(value, str) else list(value)
        if any(len(str(v)) > self.max_length for v in values):
            raise fail(self.too_long, self.error, name=self.name, max=self.max_length)
        return [w.strip() for v in values for w in str(v).split(",") if w.strip()] or None

    def schema(self, limits):
        return self._described({"type": "string", "maxLength": self.max_length})


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
            raise fail(self.not_list, name=self.name, type=type(value).__name__)
        # map/filter keep the per-item work in C: 114K CIDs are cleaned in a few ms.
        if self.not_string is not None and not all(issubclass(t, str) for t in set(map(type, value))):
            raise fail(self.not_string, name=self.name)
        strings = value if self.not_string is not None else [v for v in value if isinstance(v, str)]
        out = list(dict.fromkeys(filter(None, map(str.strip, strings))))
        if self.max_length is not None and out and max(map(len, out)) > self.max_length:
            long = next(v for v in out if len(v) > self.max_length)
            raise fail(self.too_long, name=self.name, max=self.max_length, value=long)
        if not out and self.empty is not None:
            raise fail(self.empty, name=self.name)
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
