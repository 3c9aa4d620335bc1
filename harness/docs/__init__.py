"""The documentation's reference parts, made from the declarations they describe.

The README used to keep its tables by hand: the data formats (it listed six while
the code read ten), the backends' options, the zoo's counts, each command's
options.  Each drifted the day someone added a declaration and forgot the prose.
Here every such table is a *block*: a function that renders Markdown from the
registry or the parser it documents, named by a marker comment in a page::

    <!-- dlbench:data-formats -->

``expand`` replaces each marker with its block; the site build calls it through
``hooks.py`` (a mkdocs hook named in ``mkdocs.yml``), so the pages under ``docs/``
hold prose and markers only, and a generated table is never committed.  A marker
naming no block is an error rather than an empty table.

Nothing here imports a deep-learning framework: the parser, the registries and
the zoo's framework-free counts are all the blocks read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dlbench.core.errors import UserError
from dlbench.core.registry import resolve

MARKER = re.compile(r"<!-- dlbench:([a-z0-9-]+) -->")

# Block name -> "module:function() -> Markdown"; imported only when a page names it.
BLOCKS: dict[str, str] = {
    "cli": "dlbench.harness.docs.cli:reference",
    "backends": "dlbench.harness.docs.catalog:backends",
    "backend-options": "dlbench.harness.docs.catalog:backend_options",
    "artifact-formats": "dlbench.harness.docs.catalog:artifact_formats",
    "build-targets": "dlbench.harness.docs.catalog:build_targets",
    "data-formats": "dlbench.harness.docs.catalog:data_formats",
    "zoo": "dlbench.harness.docs.catalog:zoo",
}


def render(name: str) -> str:
    """One block's Markdown, by its marker name."""
    if name not in BLOCKS:
        raise UserError(f"no generated block {name!r}; the blocks are: {', '.join(BLOCKS)}")
    block: Callable[[], str] = resolve(BLOCKS[name])
    return block().rstrip("\n") + "\n"


def expand(markdown: str) -> str:
    """``markdown`` with every marker replaced by its block."""
    return MARKER.sub(lambda m: render(m.group(1)), markdown)


def escape(text: str) -> str:
    """Plain text (an argparse help, a declaration's one line) as Markdown that shows it
    as written: no emphasis from a ``*`` in ``data_batch_*.bin``, no HTML from ``<N>``,
    no cell break from a ``|`` inside a table."""
    return re.sub(r"([\\`*_\[\]>|])", r"\\\1", text).replace("<", "&lt;")


CODE = re.compile(r"``(.+?)``|`([^`]+)`")


def prose(text: str) -> str:
    """A docstring's text as Markdown: its ````code```` (reST) and `code` spans stay code,
    the rest is escaped like any plain text."""
    out, at = [], 0
    for m in CODE.finditer(text):
        out += [escape(text[at : m.start()]), f"`{m.group(1) or m.group(2)}`"]
        at = m.end()
    return "".join(out) + escape(text[at:])


def table(headers: tuple[str, ...], rows: list[list[str]]) -> str:
    """A Markdown table; cells are Markdown already (escape plain text first)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.replace("\n", " ") for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"
