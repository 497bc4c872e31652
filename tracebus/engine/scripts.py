"""Loads a layer's Lua scripts from its ``lua/`` folder and registers them on a Redis client.

Each layer that owns scripts makes one :class:`ScriptLibrary` over its package
(``tracebus.engine``, ``tracebus.jobs``): the scripts live in ``<package>/lua/*.lua`` and
each opens with its KEYS/ARGV contract. Files whose name starts with ``_`` are libraries:
a script that calls their functions lists them in the library's ``preludes`` and gets them
prepended, because Redis 7.0 scripts cannot import one another. A script that opens with a
shebang (``#!lua flags=allow-oom``: it must run when Redis is full) keeps it first.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Mapping


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

    def _source(self, name: str) -> str:
        lua = resources.files(self.package) / "lua"
        own = (lua / f"{name}.lua").read_text()
        # A shebang (``#!lua flags=allow-oom``) must stay the first line, above the preludes.
        shebang, own = (own.split("\n", 1) if own.startswith("#!") else ("", own))
        parts = [(lua / f"{lib}.lua").read_text() for lib in self.preludes.get(name, ())]
        parts.append(own)
        return "\n".join(([shebang] if shebang else []) + parts)

    def register(self, client, name: str):
        """A callable ``script(keys=[...], args=[...])`` that runs by EVALSHA (loading on NOSCRIPT)."""
        return client.register_script(self.source(name))


#: The engine's own scripts (queue operations).
ENGINE_SCRIPTS = ScriptLibrary("tracebus.engine", {"requeue": ("_requeue_lib",),
                                                   "autoclaim": ("_requeue_lib",)})
