"""The command reference, read from the parser ``dlbench`` itself builds.

Why the parser and not the declarations behind it: a command's options come from
three places (``core.flags`` declarations on request fields, plain ``add_argument``
calls in the query commands, and one flag per backend option made from the backend
registry, plugins included), and every one of them passes through
``harness.cli.build_parser``.  Walking that parser is the one walk that cannot miss
an option, and the help, defaults and choices shown are the ones ``--help`` shows.
``tests/test_docs.py`` derives the same list from the same parser and fails when a
page of the built site lacks one.
"""

from __future__ import annotations

import argparse

from dlbench.harness.docs import escape, prose, table

USAGE_WIDTH = 100  # usage lines wrap the same whatever terminal builds the site


def parser() -> argparse.ArgumentParser:
    from dlbench.harness.cli import build_parser

    return build_parser()


def commands(top: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser, in the order ``dlbench --help`` lists them, and a
    command's own steps after it (``synth profile``), named by their path."""
    subs = next((a for a in top._actions if isinstance(a, argparse._SubParsersAction)), None)
    out: dict[str, argparse.ArgumentParser] = {}
    for name, sub in (subs.choices if subs else {}).items():
        out[prefix + name] = sub
        out.update(commands(sub, prefix + name + " "))
    return out


def documented(p: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions a reference lists: all but argparse's own ``-h``."""
    return [a for a in p._actions if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]


def spellings(action: argparse.Action) -> list[str]:
    """How a user writes the action: every option string, or a positional's name."""
    return list(action.option_strings) or [str(action.metavar or action.dest).upper()]


def _help(p: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text with argparse's ``%(default)s``-style fields filled, as ``--help``
    fills them."""
    text = action.help or ""
    if "%" not in text:
        return text
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = p.prog
    for key, value in params.items():
        if hasattr(value, "__name__"):
            params[key] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return text % params


def _default(action: argparse.Action) -> str:
    value = action.default
    if value is argparse.SUPPRESS or value is None or value is False or value == []:
        return ""
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    return f"`{value}`"


def _names(action: argparse.Action) -> str:
    metavar = action.metavar if isinstance(action.metavar, str) else None
    if not action.option_strings:
        return f"`{spellings(action)[0]}`"
    takes = "" if action.nargs == 0 else f" {metavar or action.dest.upper()}"
    return "<br>".join(f"`{s}{takes}`" for s in action.option_strings)


def _row(p: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    choices = ", ".join(f"`{c}`" for c in action.choices) if action.choices else ""
    return [_names(action), _default(action), choices, escape(_help(p, action))]


def _usage(p: argparse.ArgumentParser) -> str:
    kept = p.formatter_class
    p.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=USAGE_WIDTH)
    try:
        return p.format_usage().strip()
    finally:
        p.formatter_class = kept


def _options(p: argparse.ArgumentParser, level: str) -> list[str]:
    out = []
    for group in p._action_groups:
        actions = [a for a in group._group_actions if a in documented(p)]
        if not actions:
            continue
        title = group.title or "options"
        out += [
            f"{level} {title[:1].upper()}{title[1:]}",
            "",
            table(("Option", "Default", "Values", "What it does"), [_row(p, a) for a in actions]),
        ]
    return out


def _paragraphs(text: str) -> list[str]:
    """A module docstring as Markdown paragraphs (its line breaks are the source's)."""
    return [prose(" ".join(par.split())) + "\n" for par in text.strip().split("\n\n") if par.strip()]


def reference() -> str:
    """Every command: what it does, its usage line and a table per option group."""
    top = parser()
    out = [
        "Every command and option below is read from the parser `dlbench` builds, so it is "
        "what `dlbench COMMAND --help` says on this version.",
        "",
        "## dlbench {#dlbench}",
        "",
        f"```text\n{_usage(top)}\n```",
        "",
        *_options(top, "###"),
    ]
    for name, sub in commands(top).items():
        anchor = name.replace(" ", "-")
        out += [f"## dlbench {name} {{#{anchor}}}", "", f"```text\n{_usage(sub)}\n```", ""]
        out += _paragraphs(sub.description or "")
        out += _options(sub, "###")
    return "\n".join(out) + "\n"
