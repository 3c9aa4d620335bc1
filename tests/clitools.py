"""Assertions about how the CLI answers, shared by the command tests."""


def assert_usage_error(out, *needles):
    """Bad input: exit 2, exactly one line on stderr naming the problem, no traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "Traceback" not in out.stderr
    for n in needles:
        assert n in lines[0], lines[0]
