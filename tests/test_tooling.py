"""Lint, format and types, enforced by the suite (``make test``) rather than by habit.

The rule sets live in pyproject.toml.  Each check runs the installed tool on the
checkout as a subprocess and fails with the tool's own report.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.utils import ROOT

BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:  # the test extra installs both: a missing one is a broken install
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return path


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_passes():
    out = _run(_tool("ruff"), "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_format_check_passes():
    out = _run(_tool("ruff"), "format", "--check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_passes_on_the_typed_modules():
    out = _run(_tool("mypy"), "--no-incremental")
    assert out.returncode == 0, out.stdout + out.stderr
