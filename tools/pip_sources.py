"""Print pip's configured package sources as uv options, for the Makefile's install.

uv installs the lock in about a third of pip's time on two cores (it downloads, unpacks
and byte-compiles in parallel), but it reads no pip configuration: on a machine whose
pip is pointed at a mirror, a wheel folder or a local index (pip.conf, PIP_* variables),
uv alone would look only at PyPI.  This hands it the same sources.  With more than one
index, uv's default takes a package from the first index that has it at any version;
``unsafe-best-match`` weighs them all, as pip does, so the lock's exact pins resolve.

Standard library only: it runs with the venv's bare interpreter, before anything else is
installed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

OPTIONS = {"index-url": "--default-index", "extra-index-url": "--index", "find-links": "--find-links"}


def sources(listing: str) -> list[str]:
    """uv options for ``pip config list`` output: ``section.key='value'`` lines from the
    config files, ``:env:.key='value'`` for PIP_* variables.  As in pip, a variable beats
    the files and the ``install`` section beats ``global``; a value may hold several
    space-separated locations."""
    chosen: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if name not in OPTIONS:
            continue
        rank = 2 if section.startswith(":env:") else 1 if section.endswith("install") else 0
        if rank >= chosen.get(name, (-1, ""))[0]:
            chosen[name] = (rank, value.strip().strip("'\""))
    args = ["--index-strategy", "unsafe-best-match"]
    for name, (_, value) in chosen.items():
        for location in value.split():
            args += [OPTIONS[name], location]
    return args


def main() -> int:
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    ).stdout
    print(shlex.join(sources(listing)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
