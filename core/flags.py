"""Command-line options declared once, on the request dataclass field they fill.

A request (``BenchRequest``, ``StopRule``, the input group ...) is what the CLI,
``dlbench run``'s stages and the Python API all build.  Each field that a flag
sets carries that flag in its metadata (``flag(...)``): its spellings, help,
argparse type, whether it repeats, how the parsed text becomes the field's value
(``read``) and how a value is written back as command-line text (``write``).
From that one declaration, generic code here derives:

- the argparse arguments, grouped as declared (``add_arguments``), whose help
  shows the field's own default (``{default}`` in the help text);
- the request from the parsed namespace (``from_args``);
- the argv that makes the same request (``to_argv``): what a ``dlbench run``
  stage prints and what the generated scripts run, so a stage builds one
  request and uses it both to run and to print;
- through the parser, ``--config`` TOML keys with their checks and
  ``--print-config`` (``harness.cli.config``), whose keys are the long names.

Fields may nest (``nested(StopRule)``), and a group of fields may be shared by
every command that includes it: a dataclass with ``kw_only`` fields is mixed
into each request that takes it (``harness.bench.input_args.InputFields``).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError

_KEY, _NESTED, _SPELLED = "dlbench.flag", "dlbench.nested", "dlbench.spelled_out"


@dataclass(frozen=True)
class Also:
    """Another spelling that fills the same field in another form (trtexec's ``--shapes``
    beside ``--shape``): parsed on its own, handed to the field's ``read`` after the
    main flag's value."""

    name: str
    help: str
    metavar: str | None = None


@dataclass(frozen=True)
class Flag:
    names: tuple[str, ...]
    help: str | Callable[[], str] = ""  # a callable: text known once plugins are loaded
    type: Callable[[str], Any] | None = None
    many: bool = False  # repeatable; the values arrive as a list
    switch: bool = False  # present or not
    negatable: bool = False  # a switch with a --no- form (--float-tail / --no-float-tail)
    off: str | None = None  # a switch pair's other spelling (--dynamic-batch / --static-batch)
    off_help: str = ""
    invert: bool = False  # a switch that sets the field False (--per-tensor: per_channel)
    read: Callable[..., Any] | None = None  # parsed value(s) -> the field's value
    # The field's value -> one text per flag, or (spelling, text) for an ``also`` form.
    write: Callable[[Any], list[Any]] | None = None
    group: str | None = None
    metavar: str | None = None
    choices: tuple[Any, ...] | Callable[[], tuple[Any, ...]] | None = None
    required: bool = False
    also: tuple[Also, ...] = ()
    argv: bool = True  # a stage's argv carries it (not so for where results go, say)
    spelled_out: bool = False  # an argv writes it even at its default (a training step's setup)

    @property
    def positional(self) -> bool:
        return not self.names[0].startswith("-")

    @property
    def spelling(self) -> str:
        """The name an argv writes: the first given (``-b`` where a script says ``-b``)."""
        return self.names[0]

    @property
    def long(self) -> str:
        return next((n for n in self.names if n.startswith("--")), self.names[0])


def flag(
    *names: str, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING, **kw: Any
) -> Any:
    """A dataclass field that a command-line flag sets (see the module's docstring)."""
    return field_of(Flag(names=names, **kw), default=default, factory=factory)


def field_of(fl: Flag, default: Any = dataclasses.MISSING, factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field set by ``fl``: a flag several requests share (``--executor``)."""
    meta = {_KEY: fl}
    if factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def nested(cls: type, spelled_out: bool = False, factory: Callable[[], Any] | None = None) -> Any:
    """A field holding another request whose fields carry flags (``StopRule`` in a bench);
    ``factory`` gives its default instance (a run's own stop rule), else ``cls()``.
    ``spelled_out``: an argv writes each of its set fields even at the default, so a
    printed step says in full how it measures."""
    return dataclasses.field(default_factory=factory or cls, metadata={_NESTED: cls, _SPELLED: spelled_out})


# The widest integer an option takes: counts, sizes and seconds beyond it are typos, and a
# record's 64-bit SQLite columns and the engines' int32 APIs must hold what was asked.
INT_LIMIT = 2**31 - 1


class NumberError(ValueError):
    """A number an option cannot take; its text is the whole explanation."""


def number(kind: type, low: float | None = None, high: float | None = None) -> Callable[[Any], Any]:
    """A flag type for one number: parsed, finite, within ``low``..``high`` and, for an int,
    within ``INT_LIMIT``; the same check for the command line and a config file's value.
    Every declared flag of type ``int`` or ``float`` gets it (``checked``)."""
    top = INT_LIMIT if kind is int else None
    high = top if high is None else high
    low = -top if low is None and top is not None else low

    def parse(text: Any) -> Any:
        if isinstance(text, bool):
            raise NumberError(f"{text!r} is not a number")
        try:
            value = kind(text)
        except (ValueError, TypeError, OverflowError):
            raise NumberError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and not math.isfinite(value):
            raise NumberError(f"{text!r} is not a finite number")
        if low is not None and value < low:
            raise NumberError(f"{text!r} is below {low:,}")
        if high is not None and value > high:
            raise NumberError(f"{text!r} is above {high:,}")
        return value

    parse.__name__ = kind.__name__
    parse.number = True  # type: ignore[attr-defined]
    return parse


def checked(kind: Any) -> Any:
    """``int`` and ``float`` as ``number`` types; any other type as it is."""
    return number(kind) if kind in (int, float) else kind


def _argparse_type(kind: Any) -> Any:
    """argparse prints an ArgumentTypeError's text as it is ("argument --x: 'nan' is ...")."""
    if kind not in (int, float) and not getattr(kind, "number", False):
        return kind  # str, a comma list, a type of its own: as declared
    kind = checked(kind)

    def parse(text: str) -> Any:
        try:
            return kind(text)
        except NumberError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = getattr(kind, "__name__", "value")
    return parse


def split(values: Any, kind: Callable[[str], Any] = str) -> list[Any]:
    """Comma lists and repeated flags alike ("1,8" "32" -> [1, 8, 32]), first occurrence kept."""
    out = []
    kind = checked(kind)
    for v in values or []:
        for part in str(v).split(","):
            if part.strip():
                try:
                    out.append(kind(part.strip()))
                except NumberError as exc:
                    raise UserError(str(exc)) from None
                except ValueError:
                    raise UserError(f"{part.strip()!r} is not a valid {kind.__name__}") from None
    return list(dict.fromkeys(out))


def comma_list(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    """A flag type for a comma list (``--batch-sizes 1,8``): a config file may give a list."""

    def parse(text: str) -> list[Any]:
        try:
            return split([text], kind)
        except UserError as exc:  # argparse's own line: "argument --batch-sizes: ..."
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = f"comma-separated {kind.__name__}"
    parse.comma = True  # type: ignore[attr-defined]
    return parse


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def declared(cls: type) -> Iterator[tuple[dataclasses.Field, Flag]]:
    """Every (field, flag) of ``cls``, nested requests' included, in declaration order:
    the request's own fields first, then the groups mixed into it (keyword-only)."""
    for f, fl, _ in _walk(cls, None):
        yield f, fl


def _walk(cls: type, defaults: Any) -> Iterator[tuple[dataclasses.Field, Flag, Any]]:
    """(field, flag, default) of every declared flag; a nested request's defaults are its
    field's default instance's (``dlbench run``'s own stop rule, not StopRule's)."""
    for f in _own_first(cls):
        value = default_of(f) if defaults is None else getattr(defaults, f.name)
        if _NESTED in f.metadata:
            yield from _walk(f.metadata[_NESTED], value)
        elif _KEY in f.metadata:
            yield f, f.metadata[_KEY], value


def _own_first(cls: Any) -> list[dataclasses.Field]:
    return sorted(dataclasses.fields(cls), key=lambda f: bool(f.kw_only))


def show(value: Any) -> str:
    """A value as ``--help`` and an argv spell it: a list comma-separated, a float short."""
    if isinstance(value, (list, tuple)):
        return ",".join(show(v) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _parser_default(value: Any, fl: Flag) -> Any:
    """What argparse holds for a flag not given: the field's default ``value`` as text, so
    ``--print-config`` shows it; None where the field's default is "none"."""
    if fl.also or (fl.many and value is not None and not value):
        return []  # an empty collection: argparse appends to a fresh list
    if fl.many:
        return None  # unset: the field's own default (None, or a list like ["offline"])
    if fl.negatable or fl.off:
        return value
    if fl.switch:
        return False
    if value is None or value is dataclasses.MISSING:
        return None
    return show(value) if isinstance(value, (list, tuple)) else value


def add_arguments(
    p: Any,
    cls: type,
    only: set[str] | None = None,
    skip: Collection[str] = (),
    prefix: Callable[[str], str] | None = None,
    helps: dict[str, str] | None = None,
) -> None:
    """argparse arguments for ``cls``'s declared flags, each in its declared group (made on
    first use, reused by title when the command already has it); ``prefix(field)`` starts
    a help text (build: the targets that read the option)."""
    groups: dict[str | None, Any] = {None: p}
    for g in getattr(p, "_action_groups", ()):
        groups.setdefault(g.title, g)
    for f, fl, value in _walk(cls, None):
        if (only is not None and f.name not in only) or f.name in skip:
            continue
        target = groups.get(fl.group)
        if target is None:
            target = groups[fl.group] = p.add_argument_group(fl.group)
        if helps and f.name in helps:  # a command's own wording of a shared field
            fl = dataclasses.replace(fl, help=helps[f.name])
        if prefix is not None:
            fl = dataclasses.replace(fl, help=prefix(f.name) + _text(fl.help))
        add_flag(target, f.name, fl, value, _parser_default(value, fl))


def _text(value: Any) -> Any:
    return value() if callable(value) else value


def add_flag(target: Any, dest: str, fl: Flag, value: Any, parsed: Any = None) -> None:
    """One declared flag on an argparse parser or group: ``value`` is the request's
    default (what the help shows), ``parsed`` what argparse holds when it is not given."""
    text = _text(fl.help).replace("{default}", "none" if value is None else show(value))
    if fl.positional:  # optional where the field has a default
        optional = value is not dataclasses.MISSING
        nargs = "*" if fl.many else "?" if optional else None
        extra = {"default": parsed} if optional and not fl.many else {}
        metavar = fl.metavar or (None if fl.choices else fl.names[0])
        target.add_argument(dest, nargs=nargs, metavar=metavar, choices=_text(fl.choices), help=text, **extra)
        return
    kw: dict[str, Any] = {"dest": dest, "help": text, "default": parsed}
    if fl.negatable:
        target.add_argument(*fl.names, action=argparse.BooleanOptionalAction, **kw)
        return
    if fl.off:
        pair = target.add_mutually_exclusive_group()
        pair.add_argument(*fl.names, action="store_true", **kw)
        pair.add_argument(fl.off, dest=dest, action="store_false", help=fl.off_help)
        return
    if fl.switch:
        target.add_argument(*fl.names, action="store_true", **kw)
        return
    choices = _text(fl.choices)
    metavar = fl.metavar or (None if choices else fl.long.lstrip("-").upper().replace("-", "_"))
    kw.update(type=_argparse_type(fl.type), metavar=metavar, choices=choices, required=fl.required)
    target.add_argument(*fl.names, action="append" if fl.many else "store", **kw)
    for i, also in enumerate(fl.also):
        target.add_argument(
            also.name, dest=f"{dest}__{i}", action="append", default=[], metavar=also.metavar, help=also.help
        )


def values(cls: type, args: argparse.Namespace) -> dict[str, Any]:
    """The fields ``args`` sets, as ``cls``'s constructor takes them (nested built)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if _NESTED in f.metadata:  # the field's default, with what the line sets
            out[f.name] = dataclasses.replace(default_of(f), **values(f.metadata[_NESTED], args))
            continue
        fl = f.metadata.get(_KEY)
        if fl is None or not hasattr(args, f.name):
            continue
        got = getattr(args, f.name)
        extra = [getattr(args, f"{f.name}__{i}", []) for i in range(len(fl.also))]
        if got is None and not any(extra):
            continue  # unset: the field's own default
        if fl.invert:
            got = not got
        out[f.name] = fl.read(got, *extra) if fl.read else got
    return out


def from_args(cls: type, args: argparse.Namespace, **given: Any) -> Any:
    """``cls`` from the parsed namespace; ``given`` fills what no flag declares."""
    return cls(**{**values(cls, args), **given})


def to_argv(
    obj: Any, skip: Collection[str] = (), spelled_out: bool = False, defaults: Any = None
) -> list[str]:
    """The flags that make ``obj`` again: each field away from its default (each set one
    where ``spelled_out``), in declaration order, positionals first.  A stage's printed
    step and the run's request are one."""
    heads: list[str] = []
    tail: list[str] = []
    for f in _own_first(obj):
        value = getattr(obj, f.name)
        default = default_of(f) if defaults is None else getattr(defaults, f.name)
        if _NESTED in f.metadata:
            tail += to_argv(value, skip, f.metadata[_SPELLED], default)
            continue
        fl = f.metadata.get(_KEY)
        at_default = value is None if spelled_out or (fl and fl.spelled_out) else value == default
        if fl is None or not fl.argv or f.name in skip or at_default:
            continue
        if fl.positional:
            heads += [str(v) for v in value] if fl.many else [str(value)]
        elif fl.negatable or fl.off:
            tail += [fl.spelling if value else fl.off or "--no-" + fl.long[2:]]
        elif fl.switch:
            tail += [fl.spelling] if bool(value) != fl.invert else []
        else:
            texts = fl.write(value) if fl.write else (map(show, value) if fl.many else [show(value)])
            for text in texts:  # a (spelling, text) pair: another spelling's form (--shapes)
                tail += list(text) if isinstance(text, tuple) else [fl.spelling, text]
    return heads + tail
