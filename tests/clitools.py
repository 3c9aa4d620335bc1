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
