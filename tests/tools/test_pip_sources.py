"""tools/pip_sources.py: the Makefile's uv install looks where pip is configured to look."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys

from tests.utils import ROOT

SCRIPT = ROOT / "tools" / "pip_sources.py"
# By its path: "tools" is no package of ours, and tf2onnx installs a folder of that name.
_spec = importlib.util.spec_from_file_location("pip_sources", SCRIPT)
assert _spec is not None and _spec.loader is not None
pip_sources = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pip_sources)
sources = pip_sources.sources

LISTING = """\
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/srv/old-wheels'
global.index-url='https://pypi.org/simple'
install.index-url='https://mirror.example/simple'
"""


def test_every_index_and_wheel_folder_becomes_a_uv_option():
    args = sources(LISTING)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    pairs = list(zip(args[2::2], args[3::2]))
    # A PIP_* variable beats the files, whichever line pip lists first, and the install
    # section beats global; a space-separated value is several locations.
    assert ("--find-links", "/opt/wheels") in pairs
    assert ("--index", "file:///opt/pypi/simple") in pairs
    assert ("--index", "file:///opt/pypi-more/simple") in pairs
    assert ("--default-index", "https://mirror.example/simple") in pairs
    assert ("--find-links", "/srv/old-wheels") not in pairs
    assert len(pairs) == 4


def test_nothing_configured_leaves_uv_on_its_defaults():
    assert sources("") == ["--index-strategy", "unsafe-best-match"]


def test_the_script_prints_options_a_shell_splits_back():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    args = shlex.split(out.stdout)
    assert args[:2] == ["--index-strategy", "unsafe-best-match"]
    assert all(a.startswith("--") for a in args[0::2]), args
