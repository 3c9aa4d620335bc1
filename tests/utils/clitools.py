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
