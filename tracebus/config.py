"""The one helper that reads configuration from the environment.

Each layer declares its own settings as a frozen dataclass whose fields are made with
:func:`setting` (variable, default, parser and doc declared once: gunicorn's
one-declaration idea), derived from the settings class of the layer below:
:class:`tracebus.engine.settings.Settings` (Redis, queue, supervisor, logging) <-
:class:`tracebus.jobs.settings.JobSettings` (TTLs, quotas, in-flight caps) <-
:class:`tracebus.trace.settings.TraceSettings` (the trace application) <-
:class:`api.settings.ApiSettings` (HTTP). Code in a layer reads only its own fields and
those below. :meth:`EnvSettings.from_env` is the only code in tracebus that reads
``os.environ``; values are validated eagerly and a bad one raises :class:`ConfigError`
naming the variable and the value. Constructors take a settings object as an argument;
nothing reads a global.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable, Mapping, TypeVar

from tracebus.errors import ConfigError

S = TypeVar("S", bound="EnvSettings")


def parse_int(name: str, raw: str, minimum: int | None) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {value}")
    return value


def parse_str(name: str, raw: str, minimum: int | None) -> str:
    return raw


def parse_choice(*choices: str) -> Callable[[str, str, int | None], str]:
    def parse(name: str, raw: str, minimum: int | None) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
        return value

    return parse


def setting(env: str, default, parse=parse_int, minimum: int | None = 0, doc: str = ""):
    """Declare a field together with its environment variable (gunicorn's one-declaration idea)."""
    return field(default=default, metadata={"env": env, "parse": parse, "minimum": minimum, "doc": doc})



@dataclass(frozen=True)
class EnvSettings:
    """Base of every layer's settings: reading, overriding and documenting them."""

    @classmethod
    def is_set(cls, variable: str, environ: Mapping[str, str] | None = None) -> bool:
        """True when ``variable`` is set to a non-empty value (as opposed to defaulted)."""
        environ = os.environ if environ is None else environ
        return bool(environ.get(variable))

    @classmethod
    def child_environ(cls, overrides: Mapping[str, str],
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment of a child process: this one's, with ``overrides`` applied."""
        environ = os.environ if environ is None else environ
        return {**environ, **overrides}

    @classmethod
    def from_env(cls: type[S], environ: Mapping[str, str] | None = None, **overrides) -> S:
        """Build settings from environment variables.

        Args:
            environ: the mapping to read (``os.environ`` when None).
            **overrides: field values that win over the environment (CLI flags).

        Raises:
            ConfigError: a variable holds a value of the wrong type or range.
        """
        environ = os.environ if environ is None else environ
        values = {}
        for f in dataclasses.fields(cls):
            env = f.metadata["env"]
            raw = environ.get(env)
            if raw is not None and raw != "":
                values[f.name] = f.metadata["parse"](env, raw, f.metadata["minimum"])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def adopt(cls: type[S], settings: "EnvSettings") -> S:
        """``settings`` when it already is a ``cls``; else a ``cls`` read from the environment
        that keeps every field ``settings`` has (so a layer above the one that made the
        process's settings sees its CLI overrides, and reads its own fields once)."""
        if isinstance(settings, cls):
            return settings
        return cls.from_env(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)})

    def replace(self: S, **changes) -> S:
        """Return a copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def documented(cls) -> list[tuple[str, object, str]]:
        """(variable, default, description) of every setting, for docs and deploy/."""
        return [(f.metadata["env"], f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]
