"""The mkdocs hook (``hooks:`` in mkdocs.yml) that fills the pages' generated blocks.

A hook rather than a step that writes pages first: the generated Markdown exists only
inside the build, so there is no generated file to forget, commit by hand or let go
stale, and ``mkdocs serve`` shows the same pages ``make docs`` builds.  It documents the
checkout being built (the folder holding mkdocs.yml goes first on ``sys.path``), not
whichever dlbench the environment has installed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def on_config(config: Any) -> Any:
    root = str(Path(config.config_file_path).resolve().parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    # Snippets (the figures' tables) are found from the docs folder wherever mkdocs is run
    # from: pymdownx reads a relative base_path from the working directory.
    snippets = config.mdx_configs.get("pymdownx.snippets")
    if snippets is not None:
        snippets["base_path"] = [config.docs_dir]
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from mkdocs.exceptions import PluginError

    from dlbench.core.errors import UserError
    from dlbench.harness.docs import expand

    try:
        return expand(markdown)
    except UserError as exc:
        raise PluginError(f"{page.file.src_path}: {exc}") from None
