"""Assertions about how the CLI answers, shared by the command tests."""

import json


def assert_usage_error(out, *needles):
    """Bad input: exit 2, exactly one line on stderr naming the problem, no traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def only_record(directory, name):
    """The one record a command wrote to ``--json directory/name``."""
    [rec] = json.loads((directory / name).read_text())
    return rec


def write_module(directory, name, source):
    """``source`` saved as ``directory/name.py`` (the file a user gives --model-from) and
    imported here, so the test can save the models it builds."""
    import importlib.util
    import sys

    path = directory / f"{name}.py"
    path.write_text(source)
    key = f"dlbench_test_{name}"  # never shadows a standard module ("code")
    spec = importlib.util.spec_from_file_location(key, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


def micro_records(db) -> list[dict]:
    """The ``micro`` records (micro and layer cells) in results database ``db``, with their
    context and metrics parsed."""
    import sqlite3

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("SELECT * FROM records WHERE kind = 'micro'")]
    con.close()
    for r in rows:
        r["context"], r["metrics"] = json.loads(r["context"]), json.loads(r["metrics"])
    return rows


# Variables read once per process (plugins are imported at the first registry read; a path
# changes what the parent itself imports): a run that sets one gets a process of its own.
PROCESS_ONLY = ("DLBENCH_PLUGINS", "PYTHONPATH")


def run_cli(*args, env: dict | None = None, cwd=None, timeout: float = 900, process: bool = False):
    """``dlbench ARGS`` as a finished process (returncode, stdout, stderr).

    In this process by default: ``dlbench.harness.cli.main`` with stdout and stderr
    captured and the environment, working directory, signal handler and argv put back
    afterwards.  A CLI process cost 0.2-0.6 s of CPU (interpreter, site-packages, the
    harness's imports, before its own work), and a core-group run started ~770 of them.
    The cells a command starts are real processes either way, so what is benchmarked is
    not affected.  A process of its own (``python -m dlbench.harness``) where the boundary
    is what is tested or state would outlive the command: ``process=True`` (signals, a new
    command's view of a database gone, what the parent imports), a variable in
    ``PROCESS_ONLY`` given, plugins in play, and Ray, whose driver joins a cluster once
    per process.  ``timeout`` bounds only a separate process; in this one the cells' own
    timeouts apply."""
    import contextlib
    import io
    import os
    import signal
    import subprocess
    import sys
    import traceback

    argv = [str(a) for a in args]
    env = {k: str(v) for k, v in (env or {}).items()}
    changed = {k for k, v in env.items() if os.environ.get(k) != v}
    ray = any(a.startswith("ray") for a in argv) or "RAY_ADDRESS" in changed
    if process or ray or changed & set(PROCESS_ONLY) or os.environ.get("DLBENCH_PLUGINS"):
        return subprocess.run(
            [sys.executable, "-m", "dlbench.harness", *argv],
            capture_output=True,
            text=True,
            env=dict(os.environ, **env),
            cwd=cwd,
            timeout=timeout,
        )
    from dlbench.harness.cli import main

    # sys.path is left as the command leaves it: a library that appends its own folder
    # at import (onnxruntime.transformers) finds its modules there on every later import.
    saved = (dict(os.environ), sys.argv, os.getcwd(), signal.getsignal(signal.SIGTERM))
    out, err = io.StringIO(), io.StringIO()
    os.environ.update(env)
    sys.argv = ["dlbench", *argv]
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse, and whatever exits as a process would
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if exc.code is not None and not isinstance(exc.code, int):
                    print(exc.code, file=sys.stderr)
            except Exception:  # noqa: BLE001 - what the interpreter prints on its way out
                traceback.print_exc()
                code = 1
    finally:
        environ, sys.argv, here, handler = saved
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(here)
        signal.signal(signal.SIGTERM, handler)
    return subprocess.CompletedProcess(["dlbench", *argv], code, out.getvalue(), err.getvalue())
