"""``--config FILE.toml`` and ``--print-config``, and the CLI's defaults read from the requests.

A config file says what a command line says: its keys are the command's long
option names without the dashes.  A table named after a command (``[bench]``,
``[run]``) holds keys only that command reads, over the top-level ones, so one
file can serve two commands whose options differ.  Rather than a second validator, the file's
values become the defaults of the command's own argparse parser after passing
that option's ``type`` and ``choices`` checks, so the command line overrides
them and the request validation that follows is the same for both.  Printing
the resolved configuration writes the same keys back, so ``--print-config``
output is a file ``--config`` accepts.

The defaults shown by ``--help`` come from the request dataclasses
(``field_default``): a default is written once, where the API reads it.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
from collections.abc import Collection
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.store.url import mask

# Options that steer this invocation but are not part of what it measures.
NOT_CONFIG = ("help", "config", "print_config", "debug", "trust_model")


def field_default(cls, name: str) -> Any:
    """The default of dataclass field ``name`` of ``cls`` (its factory's value for a list)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            if f.default is not dataclasses.MISSING:
                return f.default
            if f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
            raise KeyError(f"{cls.__name__}.{name} has no default")
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def cli_form(value: Any) -> Any:
    """A request value as its command line spells it: a list is comma-separated."""
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--config`` and ``--print-config``; call last, once every option is added."""
    g = p.add_argument_group("configuration")
    g.add_argument(
        "--config",
        metavar="FILE.toml",
        default=None,
        help="read options from a TOML file whose keys are this command's long "
        "option names (e.g. batch-sizes = [1, 8, 32]); positional arguments "
        "too; the command line overrides the file",
    )
    g.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved configuration (file + command line + defaults) as "
        "TOML that --config accepts, and exit without running anything",
    )
    p.set_defaults(_config_parser=p)


def _keyed_actions(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every key a file may use -> its action: each long option name, and positionals' names."""
    keys: dict[str, argparse.Action] = {}
    for a in p._actions:
        if a.dest in NOT_CONFIG or a.dest.startswith("_") or a.help == argparse.SUPPRESS:
            continue
        if not a.option_strings:
            keys[a.dest.replace("_", "-")] = a
        for s in a.option_strings:
            if s.startswith("--"):
                keys[s[2:]] = a
    return keys


def key_of(a: argparse.Action) -> str:
    """The one key a printed config uses for an action: its first long option name."""
    longs = [s[2:] for s in a.option_strings if s.startswith("--")]
    return longs[0] if longs else a.dest.replace("_", "-")


def config_actions(p: argparse.ArgumentParser) -> list[argparse.Action]:
    seen, out = set(), []
    for a in _keyed_actions(p).values():
        if id(a) not in seen:
            seen.add(id(a))
            out.append(a)
    return out


def _is_flag(a: argparse.Action) -> bool:
    return a.nargs == 0


def _is_many(a: argparse.Action) -> bool:
    return isinstance(a, argparse._AppendAction) or a.nargs in ("+", "*")


class _FromFile(list):
    """The default argparse sees for an option the file sets: an empty list, so an
    append option given on the command line starts afresh instead of adding to the
    file's values, and a value still holding it was not given on the command line."""


def _convert(file: str, key: str, a: argparse.Action, value: Any, scope: str = "") -> Any:
    """The file's ``value`` as argparse would have parsed it from the command line."""

    def bad(why: str) -> UserError:
        return UserError(f"{file}: {scope}key {key!r}: {why}")

    def one(v: Any) -> Any:
        if isinstance(v, (dict, list)):
            raise bad(f"expected a single value, got {v!r}")
        if isinstance(v, (datetime.date, datetime.time)):  # date includes datetime
            raise bad(f"no option takes a TOML date or time ({v.isoformat()}); quote it if it is a name")
        if isinstance(v, bool) and a.type is not None:
            raise bad(f"expected {getattr(a.type, '__name__', 'a value')}, got {str(v).lower()}")
        text = str(v)
        try:
            out = a.type(text) if a.type else text
        except argparse.ArgumentTypeError as exc:  # the type's own sentence ("'nan' is not ...")
            raise bad(str(exc)) from None
        except (TypeError, ValueError):
            raise bad(f"invalid {getattr(a.type, '__name__', 'value')} value {v!r}") from None
        if a.choices is not None and out not in a.choices:
            raise bad(f"{v!r} is not allowed; choose from {', '.join(map(str, a.choices))}") from None
        return out

    if _is_flag(a):
        if not isinstance(value, bool):
            raise bad(f"expected true or false, got {value!r}")
        if isinstance(a, argparse.BooleanOptionalAction):
            return value
        return a.const if value else a.default
    if a.nargs == "?" and a.const is not None and isinstance(value, bool):
        return a.const if value else a.default  # e.g. compile = true: the bare flag
    if _is_many(a):
        return [one(v) for v in (value if isinstance(value, list) else [value])]
    if isinstance(value, list):
        if getattr(a.type, "comma", False):  # a comma list's type reads the joined text
            return one(",".join(str(v) for v in value))
        if a.type not in (None, str):
            raise bad(f"expected one {getattr(a.type, '__name__', 'value')}, got a list")
        return one(",".join(str(one(v)) for v in value))  # a comma-separated option
    return one(value)


def read_config(path: str, p: argparse.ArgumentParser, commands: Collection[str]) -> dict[str, Any]:
    """The file's settings as ``{dest: value}``, each checked like its option; UserError else.
    ``commands``: every command's name, the tables a file may hold."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise UserError(f"--config {path}: cannot read it ({exc.strerror or exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"--config {path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"--config {path}: not UTF-8 text (byte {exc.start}), which TOML must be") from None
    command = p.prog.split()[-1]
    keys = _keyed_actions(p)
    values: dict[str, Any] = {}
    # Top-level keys first, then this command's own table over them: one file serves two
    # commands whose options differ (tune's best point, for bench and for run).
    own = data.get(command) if isinstance(data.get(command), dict) else {}
    for scope, items in (("", data), (f"[{command}] ", own)):
        for key, value in items.items():
            if isinstance(value, dict) and not scope:
                if key not in commands:
                    raise UserError(
                        f"{path}: [{key}]: a table, and the only tables a config may hold are "
                        f"a command's own ([bench], [run], ...)"
                    )
                continue  # this command's (read next) or another command's
            a = keys.get(key)
            if a is None:
                raise UserError(
                    f"{path}: {scope}key {key!r}: unknown; valid keys: "
                    f"{', '.join(sorted(key_of(x) for x in config_actions(p)))}"
                )
            values[a.dest] = _convert(path, key, a, value, scope)
    return values


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return dict(subs.choices) if subs else {}


def subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser | None:
    """The parser of command ``name`` (None if there is no such command)."""
    return _commands(parser).get(name) if name else None


def command_word(argv: list[str]) -> str | None:
    """The command a command line names: its first word that is not an option (dlbench's
    own options take no value)."""
    return next((t for t in argv if not t.startswith("-")), None)


def _subparser(parser: argparse.ArgumentParser, argv: list[str]):
    return subparser(parser, command_word(argv))


def _config_path(argv: list[str]) -> str | None:
    path = None
    for i, t in enumerate(argv):
        if t == "--config" and i + 1 < len(argv):
            path = argv[i + 1]
        elif t.startswith("--config="):
            path = t.split("=", 1)[1]
    return path


def parse_args(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)`` with the ``--config`` file's values as the defaults."""
    sub = _subparser(parser, argv)
    path = _config_path(argv)
    if sub is None or path is None or "_config_parser" not in sub._defaults:
        return parser.parse_args(argv)
    try:
        values = read_config(path, sub, _commands(parser))
    except UserError as exc:
        sub.error(str(exc))
    for a in sub._actions:
        if a.dest in values:
            a.default, a.required = _FromFile(), False
            if not a.option_strings:  # a positional the file gives may be left out
                a.nargs = "*" if _is_many(a) else "?"
    args = parser.parse_args(argv)
    from_file = set()
    for dest, value in values.items():
        given = getattr(args, dest, None)
        if _unset(given):
            setattr(args, dest, value)
            from_file.add(dest)
        elif isinstance(given, _FromFile):  # appended to on the command line
            setattr(args, dest, list(given))
    args._config_file = path
    args._config_keys = {key_of(a) for a in sub._actions if a.dest in from_file}
    return args


def _unset(value: Any) -> bool:
    return isinstance(value, _FromFile) and not value


def blame(args: argparse.Namespace, message: str) -> str:
    """A request check's message, naming the file when the refused option came from it."""
    path = getattr(args, "_config_file", None)
    for key in sorted(getattr(args, "_config_keys", ()), key=len, reverse=True):
        if f"--{key} " in f"{message} " or f"--{key}:" in message:
            return f"{path}: key {key!r}: {message}"
    return message


def resolved(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration in force, keyed as a config file is: what ``--config`` reads back.

    An option left at "no value" (None) is left out: TOML has no null, and leaving
    a key out is how a file says "the default".  A database URL's password is masked:
    records keep this, and ``--print-config`` output gets pasted (a server's password
    belongs in ``~/.pgpass`` or ``$PGPASSWORD``, which libpq reads).
    """
    p = getattr(args, "_config_parser", None)
    out: dict[str, Any] = {}
    if p is None:
        return out
    for a in config_actions(p):
        value = getattr(args, a.dest, None)
        if value is None or _unset(value):
            continue
        out[key_of(a)] = list(value) if isinstance(value, (list, tuple)) else value
    return {k: mask(v) if isinstance(v, str) else v for k, v in out.items()}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # a TOML basic string is a JSON string


def to_toml(config: dict[str, Any]) -> str:
    return "".join(f"{k} = {_toml_value(v)}\n" for k, v in config.items())
