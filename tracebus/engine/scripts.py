"""A layer's Lua scripts (``<package>/lua/*.lua``), registered on a client and called by the
names their headers declare.

Each layer that owns scripts makes one :class:`ScriptLibrary` over its package
(``tracebus.engine``, ``tracebus.jobs``). Each script opens with its contract, one line per
slot, and that header is the only place the order of its KEYS and ARGV is written::

    -- KEYS[1] job        hash: ...
    -- KEYS[2..7] zsets   a fixed run of keys (a sequence of exactly 6)
    -- ARGV[1] unit       ...
    -- ARGV[5..] units    the rest, any number (last only)

The caller passes keys and arguments by name and :class:`Signature` lays them out in the
header's order, so a call site cannot pass them in another order, miss one, or pass one the
script does not read.

Files whose name starts with ``_`` are libraries: a script that calls their functions lists
them in the library's ``preludes`` and gets them prepended, because Redis 7.0 scripts cannot
import one another. A script that opens with a shebang (``#!lua flags=allow-oom``: it must
run when Redis is full) keeps it first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Mapping, Sequence

from tracebus.engine.durable import run_acknowledged

_SLOT = re.compile(r"--\s*(KEYS|ARGV)\[(\d+)(\.\.(\d*))?\]\s+([a-z][a-z0-9_]*)(?:\s|$)")


@dataclass(frozen=True, slots=True)
class Slot:
    """One declared name: a single value, a run of ``size`` values, or (``size`` None, last
    only) the rest."""

    name: str
    first: int
    size: int | None = 1


@dataclass(frozen=True, slots=True)
class Signature:
    """The KEYS and ARGV a script's header declares, in order."""

    keys: tuple[Slot, ...]
    args: tuple[Slot, ...]

    @classmethod
    def parse(cls, name: str, source: str) -> "Signature":
        """Read the contract lines of the header (the comment block the file opens with).

        Raises:
            ValueError: the slots are not numbered 1, 2, ... without gaps, a name repeats, or
                an open run (``[n..]``) is not last.
        """
        sides: dict[str, list[Slot]] = {"KEYS": [], "ARGV": []}
        for line in source.splitlines():
            if not line.startswith("--") and not line.startswith("#!"):
                break
            found = _SLOT.match(line)
            if not found:
                continue
            side, first, ranged, last, slot_name = found.groups()
            size = 1 if not ranged else (int(last) - int(first) + 1 if last else None)
            sides[side].append(Slot(slot_name, int(first), size))
        for side, slots in sides.items():
            expected = 1
            for i, slot in enumerate(slots):
                if slot.first != expected or (slot.size is None and i != len(slots) - 1) or slot.size == 0:
                    raise ValueError(f"{name}.lua: {side}[{slot.first}] {slot.name} is out of order")
                expected += slot.size or 0
            names = [s.name for s in slots]
            if len(set(names)) != len(names):
                raise ValueError(f"{name}.lua: a {side} name repeats: {names}")
        return cls(tuple(sides["KEYS"]), tuple(sides["ARGV"]))

    def key_names(self) -> tuple[str, ...]:
        """The declared KEYS names, in order."""
        return tuple(s.name for s in self.keys)

    def arg_names(self) -> tuple[str, ...]:
        """The declared ARGV names, in order."""
        return tuple(s.name for s in self.args)

    @staticmethod
    def lay_out(script_name: str, side: str, slots: tuple[Slot, ...], values: Mapping[str, Any]) -> list:
        """``values`` by name -> the list Redis takes, in the declared order.

        Raises:
            TypeError: a declared name is missing, an extra one is given, or a run has the wrong length.
        """
        missing = [s.name for s in slots if s.name not in values]
        extra = sorted(set(values) - {s.name for s in slots})
        if missing or extra:
            raise TypeError(f"{script_name}: {side} missing {missing}, not declared {extra}")
        out: list = []
        for slot in slots:
            value = values[slot.name]
            if slot.size == 1:
                out.append(value)
                continue
            value = list(value)
            if slot.size is not None and len(value) != slot.size:
                raise TypeError(f"{script_name}: {side} {slot.name} takes {slot.size} values, not {len(value)}")
            out.extend(value)
        return out


class NamedScript:
    """One script registered on a client, called with its keys and arguments by name.

    Args:
        library(ScriptLibrary): where its source and header are.
        client(redis.Redis): the client it runs on.
        name(str): ``<package>/lua/<name>.lua``.
    """

    def __init__(self, library: "ScriptLibrary", client, name: str):
        self.name, self._client = name, client
        self.signature = library.signature(name)
        self._script = client.register_script(library.source(name))

    def __call__(self, keys: Mapping[str, Any], args: Mapping[str, Any], *, wait: tuple[int, int] = (0, 0),
                 also: Sequence = ()):
        """Run the script (by EVALSHA, loading it on NOSCRIPT).

        Args:
            keys, args: every declared name -> its value (a sequence for a run).
            wait: (replicas, timeout ms): WAIT for that many replicas after it (``run_acknowledged``).
            also: keys of other slots written just before, whose masters are waited for too.
        """
        sig = self.signature
        return run_acknowledged(self._client, self._script, sig.lay_out(self.name, "KEYS", sig.keys, keys),
                                sig.lay_out(self.name, "ARGV", sig.args, args), *wait, also=also)


class ScriptLibrary:
    """The Lua scripts of one package.

    Args:
        package(str): the package whose ``lua/`` folder holds the scripts.
        preludes: script name -> library files (without ``.lua``) prepended to it.
    """

    def __init__(self, package: str, preludes: Mapping[str, tuple[str, ...]]):
        self.package = package
        self.preludes = dict(preludes)
        self.source = cache(self._source)
        self.signature = cache(self._signature)

    def _own(self, name: str) -> str:
        return (resources.files(self.package) / "lua" / f"{name}.lua").read_text()

    def _source(self, name: str) -> str:
        """The script as Redis runs it: its preludes, then its own text."""
        own = self._own(name)
        # A shebang (``#!lua flags=allow-oom``) must stay the first line, above the preludes.
        shebang, own = (own.split("\n", 1) if own.startswith("#!") else ("", own))
        parts = [self._own(lib) for lib in self.preludes.get(name, ())]
        parts.append(own)
        return "\n".join(([shebang] if shebang else []) + parts)

    def _signature(self, name: str) -> Signature:
        """The KEYS/ARGV contract declared at the top of the script's own file."""
        return Signature.parse(name, self._own(name))

    def register(self, client, name: str) -> NamedScript:
        """The script ``name`` on ``client``, called with ``keys`` and ``args`` mappings of the
        names its header declares."""
        return NamedScript(self, client, name)


#: The engine's own scripts (queue operations).
ENGINE_SCRIPTS = ScriptLibrary("tracebus.engine", {"requeue": ("_requeue_lib",),
                                                   "autoclaim": ("_requeue_lib",)})
