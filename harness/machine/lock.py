"""The versions the test suite passed with, and where this installation differs.

``make install`` applies ``constraints-cpu.txt`` (next to this file) as pip
constraints, so a fresh machine gets exactly the tested stack.  Someone who
installed by hand, or upgraded one package, gets numbers from another stack
than the one the suite vouches for: ``dlbench env`` says so, and records keep
the drift with the versions.  Read from package metadata: nothing is imported.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
from pathlib import Path

LOCK_FILE = Path(__file__).resolve().parents[1] / "constraints-cpu.txt"  # harness/
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(path: Path = LOCK_FILE) -> dict[str, str]:
    """Distribution name (canonical) -> exact version, from ``name==version`` lines."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return {}
    pins = {}
    for line in text.splitlines():
        m = _PIN.match(line)
        if m:
            pins[_canonical(m.group(1))] = m.group(2)
    return pins


def dist_info_versions() -> dict[str, str]:
    """Installed versions by canonical name, read off the ``NAME-VERSION.dist-info`` folder
    names on ``sys.path`` (the first one found wins, as for imports).  Every fingerprint
    checks ~140 pins: one ``importlib.metadata.version`` each parsed that many METADATA
    files, 0.1 s of every CLI process, and the suite starts hundreds of them."""
    found: dict[str, str] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for folder in names:
            if folder.endswith(".dist-info"):
                name, sep, version = folder[: -len(".dist-info")].partition("-")
                if sep and version:
                    found.setdefault(_canonical(name), version)
    return found


def _public(version: str) -> str:
    """'2.13.0+cpu' -> '2.13.0': pip's == ignores the local label, and so do we."""
    return version.split("+", 1)[0]


def drift(path: Path = LOCK_FILE) -> list[dict[str, str]]:
    """Installed distributions whose version is not the locked one (absent ones are not drift:
    the extras a user did not ask for are simply not installed)."""
    out = []
    listed = dist_info_versions()
    for name, want in sorted(pinned(path).items()):
        have = listed.get(name)
        if have is None or _public(have) != _public(want):
            # Installed another way (an .egg-info), not at all, or spelled otherwise in the
            # folder's name than in its METADATA, which is the word that counts.
            try:
                have = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                continue
        if _public(have) != _public(want):
            out.append({"package": name, "installed": have, "lock": want})
    return out
