"""A bounded fuzzer for what a user types: every numeric option of every command, and
config files, given hostile values by seed.  Used by tests/test_fuzz.py;
``python tests/utils/cli_fuzz.py --cases 2000`` is the long run.

The options come from the CLI's own parser, so an option added later is fuzzed without
an edit here.  Each case runs ``dlbench.harness.cli.main`` in this process, with the
command's positionals after the option and naming nothing that exists: a value the option
takes moves on to a refusal of the positional (milliseconds), one it rejects is refused
itself.  Either way the ending must be what ``onnx_fuzz.problem`` accepts: exit 0, 1, or
2 with exactly one ``error:`` line; never a traceback or a hang.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
from collections import Counter
from pathlib import Path

from tests.utils.onnx_fuzz import problem, run_cli

# Text a number option may be handed: not numbers, non-finite, out of every width,
# other numeral systems, and separators Python's own int() and float() accept.
NUMBERS = (
    "nan", "NaN", "inf", "-inf", "+inf", "1e309", "-1e309", "99999999999999999999", "2147483648",
    "-2147483649", "9223372036854775808", "-1", "-0", "0", "0.0", "1e-320", "3.5", "1e3", "0x10",
    "0b1", "1_000", "1__0", "", " ", "abc", "1,", ",", "1,,2", "1;2", "١٢", "１２", "²", "1e", "--",
    "-", "true", "None", "\x00", "1\n2", "8" * 400,
)  # fmt: skip
# A config file's values (TOML text after ``key = ``): every TOML type, and numbers at and
# beyond what TOML and the options hold.
TOML_VALUES = (
    "nan", "-nan", "inf", "-inf", "1e309", "99999999999999999999", "9223372036854775807",
    "-9223372036854775808", "2147483648", "-1", "0", "3.5", "true", "false", '""', '"nan"',
    '"1,2"', "[]", "[1, 2]", '[1, "a"]', "[[1]]", "{}", "{ a = 1 }", "1979-05-27", "07:32:00",
    "1979-05-27T07:32:00Z", "0x7fffffff", "0o777", "1_000", "'\\u0000'",
)  # fmt: skip
# Whole files that are not a config at all.
BROKEN_FILES = (b"\xff\xfe\x00not utf-8", b"key = ", b"[[[", b"a = 1\na = 2", b"\x00" * 64, b"= 1")
NOTHING = "/nonexistent-dlbench-fuzz/none.onnx"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _is_number(a: argparse.Action) -> bool:
    name = getattr(a.type, "__name__", "")
    return name in ("int", "float") or name.endswith((" int", " float"))


def _nothing(sub: argparse.ArgumentParser) -> list[str]:
    """The command's positionals, each naming nothing: a choice none has, a missing file."""
    return ["fuzz-nothing" if a.choices else NOTHING for a in sub._actions if not a.option_strings]


def targets() -> list[tuple[str, str, str, list[str]]]:
    """(command, option, its config key, positionals naming nothing) for every number option."""
    from dlbench.harness.cli import build_parser
    from dlbench.harness.cli.config import key_of

    out = []
    for command, sub in _subparsers(build_parser()).items():
        positionals = _nothing(sub)
        for a in sub._actions:
            if a.option_strings and _is_number(a):
                out.append((command, a.option_strings[-1], key_of(a), positionals))
    return out


def configurable() -> list[tuple[str, list[str], list[str]]]:
    """(command, its config keys, positionals naming nothing) for every command with --config."""
    from dlbench.harness.cli import build_parser
    from dlbench.harness.cli.config import config_actions, key_of

    out = []
    for command, sub in _subparsers(build_parser()).items():
        if "_config_parser" in sub._defaults:
            out.append((command, [key_of(a) for a in config_actions(sub)], _nothing(sub)))
    return out


def cases(n: int, seed: int, folder: Path) -> list[tuple[str, list[str]]]:
    """``n`` cases by seed: (what, argv), every number option at least once when ``n`` allows."""
    rng = random.Random(seed)
    numbers, configs = targets(), configurable()
    out: list[tuple[str, list[str]]] = []
    order = numbers[:]
    rng.shuffle(order)
    for i in range(n):
        if i % 3 < 2:  # two thirds command-line numbers, one third config files
            command, option, _, positionals = order[i % len(order)]
            value = rng.choice(NUMBERS)
            form = [f"{option}={value}"] if rng.random() < 0.3 else [option, value]
            out.append((f"{command} {option}", [command, *form, *positionals]))
            continue
        command, keys, positionals = rng.choice(configs)
        path = folder / f"c{i}.toml"
        if rng.random() < 0.15:
            path.write_bytes(rng.choice(BROKEN_FILES))
            what = f"{command} --config (broken file)"
        else:
            key = rng.choice(keys)
            path.write_text(f"{key} = {rng.choice(TOML_VALUES)}\n")
            what = f"{command} --config {key}"
        out.append((what, [command, "--config", str(path), *positionals]))
    return out


def fuzz(folder: Path, n: int, seed: int = 0) -> dict:
    """Run ``n`` cases; the counts by ending and the problems (case, argv, why, stderr)."""
    outcomes: Counter = Counter()
    problems = []
    for i, (what, argv) in enumerate(cases(n, seed, folder)):
        # Each case in an empty folder of its own: what a refusal leaves behind shows, and
        # a path option given a number or a date writes there, not into the checkout.
        cwd = folder / f"run{i}"
        cwd.mkdir()
        with contextlib.chdir(cwd):
            code, stderr = run_cli(argv)
        outcomes[code] += 1
        why = problem(code, stderr)
        if why is None and NOTHING in argv and code != 2:
            why = f"ran on a model that does not exist (exit {code})"
        if why is None and code == 2 and any(cwd.iterdir()):
            why = f"the refusal left {sorted(p.name for p in cwd.iterdir())}"
        if why:
            problems.append({"case": what, "argv": argv, "why": why, "stderr": stderr[-1500:]})
    return {"cases": n, "outcomes": outcomes, "problems": problems, "options": len(targets())}


if __name__ == "__main__":
    import tempfile

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = fuzz(Path(tmp), a.cases, a.seed)
    print(f"{result['cases']} cases over {result['options']} number options and the config files")
    print("endings:", dict(result["outcomes"]))
    for prob in result["problems"]:
        print(prob["case"], prob["argv"], prob["why"], prob["stderr"].splitlines()[-1:])
    sys.exit(1 if result["problems"] else 0)
