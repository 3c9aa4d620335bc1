"""Run the test suite as separate pytest processes, one per framework.

TensorFlow and MindSpore cannot share a process (their bundled protobuf
runtimes clash: MindSpore fails to import after TensorFlow, and the process
aborts at exit), which is also why dlbench runs every cell in its own
process.  Tests that import a framework in-process carry that framework's
marker; everything else runs in the "core" group, which conftest.py checks
never imports a framework.  ``--group NAME`` (repeatable) runs only those groups (`make
test-core`, `make test-pytorch`, ...); other arguments are passed to every pytest run.

Each group runs on every core (pytest-xdist, one test file per worker so a
module's fixtures are built once): most of a test's time is a single process
importing a framework or waiting for a cell, which leaves the other core idle.
``DLBENCH_TEST_WORKERS=1`` runs a group in one process.  Each group's 15 slowest tests
are listed, so a fresh clone's log says where its minutes went.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from dlbench.core.frameworks import NAMES

FRAMEWORKS = NAMES
GROUPS = [("core", "not (" + " or ".join(FRAMEWORKS) + ")")] + [(f, f) for f in FRAMEWORKS]
COUNT = re.compile(r"(\d+) (passed|failed|skipped|error|errors|deselected|xfailed|xpassed)")


def workers() -> list[str]:
    """pytest-xdist options for this machine (none when it is absent or one worker is asked)."""
    try:
        import xdist  # noqa: F401 - an availability probe
    except ImportError:
        return []
    n = int(os.environ.get("DLBENCH_TEST_WORKERS") or min(os.cpu_count() or 1, 4))
    return ["-n", str(n), "--dist", "loadfile"] if n > 1 else []


def chosen(argv: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """The groups named by ``--group NAME`` (repeatable; all when none) and pytest's arguments."""
    names, rest = [], []
    it = iter(argv)
    for arg in it:
        if arg == "--group" or arg.startswith("--group="):
            name = arg.partition("=")[2] or next(it, "")
            if name not in dict(GROUPS):
                groups = ", ".join(g for g, _ in GROUPS)
                print(f"suites.py: no test group {name!r} (groups: {groups})", file=sys.stderr)
                raise SystemExit(2)
            names.append(name)
        else:
            rest.append(arg)
    return [(g, e) for g, e in GROUPS if not names or g in names], rest


def main(argv: list[str]) -> int:
    totals: dict[str, int] = {}
    worst = 0
    groups, argv = chosen(argv)
    for group, expr in groups:
        print(f"\n===== dlbench tests: {group} =====", flush=True)
        env = dict(os.environ, DLBENCH_TEST_GROUP=group)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-m", expr, *workers(), "--durations=15", *argv],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        sys.stdout.write(proc.stdout)
        summary = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        for n, kind in COUNT.findall(summary):
            kind = "error" if kind == "errors" else kind
            totals[kind] = totals.get(kind, 0) + int(n)
        if proc.returncode not in (0, 5):  # 5: no test selected in this group
            worst = max(worst, proc.returncode)
    failed = totals.get("failed", 0) + totals.get("error", 0)
    line = f"{totals.get('passed', 0)} passed, {failed} failed, {totals.get('skipped', 0)} skipped"
    print(f"\ndlbench: {line}")
    if totals.get("passed", 0) == 0:
        return worst or 1
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
