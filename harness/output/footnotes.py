"""Long free text in a table cell becomes a numbered note under the table.

One cell of 200 characters (an engine's error, a verification's reasons, a
stage's why) makes its whole column that wide: the Markdown table runs off the
page in an editor or a terminal, and an HTML table squeezes every other column
into a sliver.  So a cell longer than ``CELL_CHARS`` keeps its verdict word
("FAILED", "UNVERIFIED"), or else its start and its end (a figure leads a cell,
and two long names often differ only at their end: "…_opset17", "…_opset18"),
plus a marker "[n]", and the full text is note n under the table.  Every table that can carry such text goes
through ``footnote_long_cells``: one rule, not a choice each table makes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

# Longer than this is prose, not a figure: the widest figures a report prints (a
# throughput with its UNSTABLE reason and CPU marks) stay under it.
CELL_CHARS = 60

# "FAILED: the engine said ...", "UNVERIFIED: output logits ...": the word before the
# colon is the verdict a reader scans the column for.
_VERDICT = re.compile(r"([A-Z][A-Z0-9_]{2,}):")


def marker(number: int) -> str:
    return f"[{number}]"


def _short(text: str, number: int, limit: int) -> str:
    """The verdict word with the marker, else the text's start and end around a "…"."""
    mark = f" {marker(number)}"
    verdict = _VERDICT.match(text)
    if verdict:
        return verdict.group(1) + mark
    room = limit - len(mark) - 1  # the "…"
    head = (room + 1) // 2
    return f"{text[:head]}…{text[len(text) - (room - head) :]}{mark}"


def footnote_long_cells(
    rows: Sequence[Sequence[Any]], limit: int = CELL_CHARS
) -> tuple[list[list[Any]], list[str]]:
    """``rows`` with every cell longer than ``limit`` characters shortened to a marker,
    and the notes ("[1] the full text"), in order of first use; a text that recurs
    (thirty cells failing alike) is one note.  Whitespace runs (an error's newlines)
    become one space, as they would in a table cell."""
    numbers: dict[str, int] = {}
    out = []
    for row in rows:
        cells = []
        for value in row:
            text = " ".join(str(value).split()) if value is not None else ""
            if len(text) <= limit:
                cells.append(value)
                continue
            number = numbers.setdefault(text, len(numbers) + 1)
            cells.append(_short(text, number, limit))
        out.append(cells)
    return out, [f"{marker(n)} {text}" for text, n in numbers.items()]
