"""The README stays a newcomer's one or two screens, and every command in it runs as
written.

Each shell line of the README's code blocks is run in a scratch folder, exactly as
typed, against a small ONNX model made there (``model.onnx``, the MLP ``compare
--calibrate`` measures by default) and a private results database.  ``.venv/bin/dlbench``
is, in that folder, this checkout's CLI.  The ``make`` lines install the whole stack
or run for many minutes; they are checked only for naming a target the Makefile has
(``MAKE_ONLY`` says why each is not run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from tests.utils import ROOT

README = ROOT / "README.md"
MAX_LINES = 200

# make targets the README names that this test does not run, and why.
MAKE_ONLY = {
    "install": "creates .venv with the whole CPU stack (minutes, and the network)",
    "demo": "trains ResNet-50 in three frameworks and benchmarks it (minutes)",
    "test": "the whole suite, which this test is part of",
    "docs": "installs first; tests/test_docs.py builds the same site with --strict",
    "docs-serve": "a server that runs until stopped",
}
SHELL_BLOCK = re.compile(r"^```(?:sh|bash|shell|console)\n(.*?)^```", re.M | re.S)


def commands(text: str) -> list[str]:
    """Every command of the README's shell blocks: continuation lines joined, comment
    lines and blank lines dropped (a trailing ``# comment`` stays: the shell drops it)."""
    out = []
    for block in SHELL_BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                out.append(line.strip())
    return out


def test_the_readme_fits_on_two_screens():
    lines = len(README.read_text().splitlines())
    assert lines < MAX_LINES, f"README.md has {lines} lines; the rest belongs on the site (docs/)"


def test_the_readme_links_to_files_that_exist():
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local, "the README points to no page of the site"
    assert not [link for link in local if not (ROOT / link).exists()]


def test_the_make_commands_name_targets_of_the_makefile():
    makefile = (ROOT / "Makefile").read_text()
    made = [c.split()[1] for c in commands(README.read_text()) if c.startswith("make ")]
    assert {"demo", "test"} <= set(made), "the README's two set-up commands"
    for target in made:
        assert target in MAKE_ONLY, f"make {target}: run it here, or say in MAKE_ONLY why not"
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"the Makefile has no target {target}"


def test_every_other_command_runs_as_written(tmp_path):
    from dlbench.harness.compare.noise import builtin_model

    builtin_model(tmp_path / "model.onnx")
    shim = tmp_path / ".venv" / "bin" / "dlbench"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m dlbench.harness "$@"\n')
    shim.chmod(0o755)
    env = dict(
        os.environ,
        PATH=f"{shim.parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        DLBENCH_DB=str(tmp_path / "results.sqlite"),
    )
    run = [c for c in commands(README.read_text()) if not c.startswith("make ")]
    assert len(run) >= 4, f"the quick start's commands are gone: {run}"
    for command in run:
        proc = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (
            f"{command}\nexit {proc.returncode}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        )
    assert (tmp_path / "model.int8.onnx").is_file() and (tmp_path / "report.html").is_file()
