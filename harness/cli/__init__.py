"""``dlbench``: a thin argparse layer over the Python API.

Each subcommand is a module in ``harness.commands`` with ``HELP``,
``add_arguments(parser)`` and ``run(args) -> int``; adding a command is adding
a file and its name below.  Nothing here imports a framework: commands import
what they need inside ``run``.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
import traceback

from dlbench.core.errors import UserError
from dlbench.core.registry import load_plugins
from dlbench.core.version import __version__
from dlbench.harness.cli.config import blame, command_word, parse_args
from dlbench.harness.store.url import exposed_password
from dlbench.models.user import trust

TRUST_HELP = (
    "load model files that can run code or act outside the run when loaded (pickles in a .pt2 "
    "archive or a checkpoint, a SavedModel that writes files): only for files you trust; each "
    "record says it was given"
)

COMMANDS = (
    "env",
    "models",
    "backends",
    "train",
    "export",
    "build",
    "verify",
    "bench",
    "tune",
    "micro",
    "layer",
    "profile",
    "eval",
    "run",
    "report",
    "compare",
    "synth",
)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr (and exit 2), like every other."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _get_values(self, action, arg_strings):
        # argparse drops a '--' given as an option's value (--timeout=--) and hands the
        # option an empty list without calling its type: no check would ever see it.
        if action.option_strings and action.nargs in (None, "?") and arg_strings == ["--"]:
            self.error(f"argument {'/'.join(action.option_strings)}: expected a value, got '--'")
        return super()._get_values(action, arg_strings)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with ``command``, that command's options only (the others
    are still listed, by name and help).  The options of all seventeen commands are 0.1 s
    of a process that runs one of them, and the test suite alone starts hundreds."""
    parser = _Parser(
        prog="dlbench",
        description="Train a network briefly in PyTorch, TensorFlow and MindSpore, convert it, "
        "and measure it on every inference backend, with the context that makes "
        "each number true.",
    )
    parser.add_argument("--version", action="version", version=f"dlbench {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument(trust.FLAG, action="store_true", help=TRUST_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"dlbench.harness.commands.{name.replace('-', '_')}")
        p = sub.add_parser(name, help=module.HELP, description=module.__doc__)
        if command is not None and name != command:
            continue
        p.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks for errors"
        )
        p.add_argument(trust.FLAG, action="store_true", default=argparse.SUPPRESS, help=TRUST_HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def _terminate(signum, frame):
    """SIGTERM unwinds like Ctrl-C, so staged outputs are removed on the way out.  A
    second one while that runs is ignored: raised again it cut the cleanup short, and
    during the interpreter's shutdown it printed a traceback after "interrupted"."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        load_plugins()  # before the parser: their declarations become flags
    except UserError as exc:
        if "--debug" in argv:
            traceback.print_exc()
        print(f"dlbench: error: {exc}", file=sys.stderr)
        return exc.exit_code
    # No command or an unknown one builds every command, for the help and the error.
    word = command_word(argv)
    parser = build_parser(word if word in COMMANDS else None)
    args = parse_args(parser, argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    signal.signal(signal.SIGTERM, _terminate)
    if args.trust_model:  # the cells that load the model read it from their environment
        os.environ[trust.TRUST_ENV] = "1"
    try:
        status = int(args._run(args) or 0)
        # Said after the work, so an error's one line stays one line.
        exposed = exposed_password(getattr(args, "db", None))
        if exposed:
            print(f"note: {exposed}", file=sys.stderr)
        return status
    except UserError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"dlbench {args.command}: error: {blame(args, str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"dlbench {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `dlbench env | head`: the reader left; nothing more can be said on stdout, and
        # Python's own flush at exit would print a second traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:  # after BrokenPipeError, which is one
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or args.debug:
            raise
        # Writers stage and rename (core.atomic), so what was being written is not left.
        where = f" writing {exc.filename}" if exc.filename else ""
        print(f"dlbench {args.command}: error: the disk is full{where} ({exc.strerror})", file=sys.stderr)
        return 2
