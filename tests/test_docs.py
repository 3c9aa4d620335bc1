"""The documentation site: it builds without a warning, and its reference pages show
every option, backend, format and model the code declares.

The site is built once per module (about two seconds) with ``mkdocs build --strict``
into a temporary folder, exactly as ``make docs`` builds it; the checks then read the
built HTML, so a block the hook failed to fill, a page left out of the navigation or
an option the generator dropped all fail here.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.utils import ROOT


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        env=dict(os.environ, NO_MKDOCS_2_WARNING="1"),
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert "No module named mkdocs" not in log, "mkdocs is not installed: make install (the docs extra)"
    assert proc.returncode == 0, log
    warnings = [line for line in log.splitlines() if re.match(r"\s*(WARNING|ERROR)\b", line)]
    assert not warnings, "\n".join(warnings)
    return out


def page(site: Path, path: str) -> str:
    return html.unescape((site / path / "index.html").read_text())


def test_no_marker_is_left_unfilled(site):
    """A marker the hook did not replace reaches the HTML as a comment."""
    left = [str(p.relative_to(site)) for p in site.rglob("*.html") if "<!-- dlbench:" in p.read_text()]
    assert not left, f"generated blocks not filled in: {left}"


def test_every_block_is_on_a_page():
    from dlbench.harness.docs import BLOCKS, MARKER

    used = {m for p in (ROOT / "docs").rglob("*.md") for m in MARKER.findall(p.read_text())}
    assert used == set(BLOCKS), f"blocks on no page: {set(BLOCKS) - used}; unknown: {used - set(BLOCKS)}"


def _sections(text: str) -> dict[str, str]:
    """The CLI page cut at each command's heading (``<h2 id="bench">``)."""
    cuts = [(m.group(1), m.start()) for m in re.finditer(r'<h2 id="([a-z-]+)"', text)]
    return {
        name: text[at : (cuts[i + 1][1] if i + 1 < len(cuts) else len(text))]
        for i, (name, at) in enumerate(cuts)
    }


def test_every_option_of_every_command_is_in_the_reference(site):
    """Derived from the parser, not from the generator: an option the generator drops,
    or a command it skips, is named here."""
    from dlbench.harness.cli import build_parser

    def walk(name: str, parser: argparse.ArgumentParser):
        yield name, parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for step, sub in action.choices.items():
                    yield from walk(step if name == "dlbench" else f"{name}-{step}", sub)

    sections = _sections(page(site, "reference/cli"))
    missing = []
    for name, parser in walk("dlbench", build_parser()):
        text = sections.get(name, "")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            for spelling in action.option_strings or [str(action.metavar or action.dest).upper()]:
                # In the Option column: the first cell of a row, spellings split by <br>.
                if not re.search(rf"<td>(<code>[^<]*</code><br>)*<code>{re.escape(spelling)}[ <]", text):
                    missing.append(f"{name} {spelling}")
            if action.choices:
                missing += [
                    f"{name} {action.dest}={c}" for c in action.choices if f"<code>{c}</code>" not in text
                ]
    assert not missing, f"not in the command reference: {missing}"


def test_the_catalogue_pages_list_every_declaration(site):
    from dlbench.converters.base import BUILD_TARGETS
    from dlbench.harness.backends import all_backends
    from dlbench.harness.data.formats import DATA_FORMATS
    from dlbench.harness.formats import FORMATS
    from dlbench.models.registry import get_model, list_models

    wanted = {
        "reference/backends": [b.name for b in all_backends()]
        + [f"-O {o.name}=VALUE" for b in all_backends() for o in b.options],
        "reference/formats": [f.name for f in FORMATS.all()] + list(BUILD_TARGETS.names()),
        "reference/data-formats": [f.name for f in DATA_FORMATS.all()],
        "reference/zoo": [n for n in list_models("*")]
        + [f"{get_model(n).parameter_count:,}" for n in list_models("*")],
    }
    missing = [(p, w) for p, names in wanted.items() for w in names if f"{w}" not in page(site, p)]
    assert not missing, missing


def test_the_figures_are_what_make_docs_figures_writes(tmp_path):
    """The committed figures are the target's files, and the pages show each one: a chart
    the report stops drawing, or a figure no page shows, fails here."""
    from dlbench.harness.docs.figures import make

    made = {p.name for p in make(tmp_path, min_duration=0.2)}
    assert made == {p.name for p in (ROOT / "docs" / "figures").iterdir()}
    assert b"<svg" in (tmp_path / "throughput-vs-batch.svg").read_bytes()
    pages = "".join(p.read_text() for p in (ROOT / "docs").rglob("*.md"))
    assert not [name for name in made if f"figures/{name}" not in pages]
