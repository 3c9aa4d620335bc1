"""One lazy registry for every extension point (backends, artifact formats, build
targets, data formats, objectives, ...).

Why one class: each extension point used to be a hand-rolled tuple plus a
lookup function plus an error message, written again in the help texts and
the docs, and the copies drifted.  A registry holds the declarations in
declaration order; help, TOML validation, ``dlbench backends`` and the docs
read them from here.

Entries may be given as ``"module:attribute"`` strings so that declaring a
backend costs no import: the module (which must not import its engine at
module level either) is imported the first time the entry is asked for.

Plugins: the modules named in ``DLBENCH_PLUGINS`` (comma-separated) and the
``dlbench.plugins`` entry points are imported before any registry is first
read, in the parent and in every cell's child process (the variable is
inherited), so a user's own backend or format needs no edit of dlbench.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from dlbench.core.errors import UserError

T = TypeVar("T")
PLUGINS_VARIABLE = "DLBENCH_PLUGINS"
ENTRY_POINT_GROUP = "dlbench.plugins"
_plugins_loaded = False


def resolve(target: str) -> Any:
    """The object a lazy ``"module:attribute"`` reference names (imported now)."""
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


def load_plugins() -> None:
    """Import the user's plugin modules once per process (see the module docstring)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True  # before importing: a plugin reads registries too
    names = [n.strip() for n in os.environ.get(PLUGINS_VARIABLE, "").split(",") if n.strip()]
    from importlib.metadata import entry_points

    plugins: list[tuple[str, Callable[[], Any]]] = [
        (name, functools.partial(importlib.import_module, name)) for name in names
    ]
    plugins += [(ep.value, ep.load) for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for name, load in plugins:
        try:
            load()
        except Exception as exc:
            first = next((ln for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
            raise UserError(
                f"plugin {name!r} ({PLUGINS_VARIABLE} or the {ENTRY_POINT_GROUP} "
                f"entry points) failed to load: {type(exc).__name__}: "
                f"{first}"
            ) from exc


class Registry(Generic[T]):
    """Named declarations of one kind, in the order they were declared.

    ``kind`` names the extension point in errors ("unknown backend 'x'; choose
    from: ...").  Hidden entries (test doubles) are found by name but not listed.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}
        self._hidden: set[str] = set()

    def register(self, name: str, entry: T | str, *, hidden: bool = False, replace: bool = False) -> None:
        """Declare ``name``; ``entry`` is the object or a lazy ``"module:attribute"``."""
        if name in self._entries and not replace:
            raise ValueError(f"{self.kind} {name!r} is declared twice")
        self._entries[name] = entry
        if hidden:
            self._hidden.add(name)
        else:
            self._hidden.discard(name)

    def unregister(self, name: str) -> None:
        self._entries.pop(name, None)
        self._hidden.discard(name)

    def names(self, *, hidden: bool = False) -> tuple[str, ...]:
        load_plugins()
        return tuple(n for n in self._entries if hidden or n not in self._hidden)

    def __contains__(self, name: object) -> bool:
        load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[T]:
        return iter(self.all())

    def get(self, name: str) -> T:
        load_plugins()
        if name not in self._entries:
            raise UserError(f"unknown {self.kind} {name!r}; choose from: {', '.join(self.names())}")
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = resolve(entry)
            self._entries[name] = entry
        return entry

    def all(self, *, hidden: bool = False) -> list[T]:
        return [self.get(n) for n in self.names(hidden=hidden)]
