"""Chart layout that stays legible however many series and bars a report holds.

A report over 30 artifacts drew 30 legend entries over its own data, and 30
vertical bars whose names and values ran into each other.  The rules here hold
for any count, so no chart needs its own fix:

* the legend sits below the axes, outside them, in as many columns as fit the
  figure's width, and the figure grows by the legend's rows: the data area keeps
  its height and nothing is drawn over it;
* a line chart holds at most ``SERIES_PER_CHART`` series and a bar chart at most
  ``BARS_PER_CHART`` bars; past that the series are split into several charts of
  even size, a model's series kept together (``parts``);
* bars are horizontal: each name reads along its own row, never across its
  neighbour's, and each value sits at its bar's end; a row is tall enough for
  its text, and a value that would still touch another or leave the figure is
  left out rather than drawn over it;
* labels drop the fields every series of the chart shares, which are said once
  under the title (``distinct``), and a name longer than ``LABEL_CHARS`` is cut
  in the middle, its full text in the chart's key (``shorten``).

matplotlib is imported only when a figure is built, through ``Figure`` and the Agg
canvas directly: no pyplot global state, no display, no backend switch that could
surprise a caller that has its own.
"""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from typing import Any

from dlbench.harness.report.tables import num

WIDTH_IN = 8.0
AXES_IN = 3.2  # the data area's height in a line chart, whatever its legend needs
FRAME_IN = 1.3  # title, subtitle, tick labels and axis label around the data area
LEGEND_ROW_IN = 0.2  # one legend row at FONT
BAR_ROW_IN = 0.28  # one horizontal bar: its name and value at FONT, with air between rows
FONT = 8
# matplotlib's default colour cycle has ten colours: an eleventh line would repeat one.
SERIES_PER_CHART = 10
BARS_PER_CHART = 25  # 25 rows of BAR_ROW_IN: a chart of about 8.5 inches, a page's height
LABEL_CHARS = 48  # at FONT, under a third of the chart's width
COMMON_CHARS = 100  # the shared fields' line under the title, at its 10 pt: the chart's width


@dataclass
class Plot:
    """One chart of the report: ``figure()`` builds its matplotlib Figure (None: nothing
    to draw), ``svg`` is that figure as the HTML embeds it, ``note`` says how to read it, or why it
    was skipped, and holds the key to any name cut short."""

    title: str
    figure: Callable[[], Any] | None
    note: str = ""

    @cached_property
    def svg(self) -> bytes | None:
        """What the HTML report embeds: text stays text, drawn by the reader's browser."""
        if self.figure is None:
            return None
        with _glyphs_drawn_elsewhere():
            return svg(self.figure())


def parts(keys: Sequence[Any], group: Callable[[Any], Hashable], limit: int) -> list[list[Any]]:
    """``keys`` in order, split into charts of at most ``limit`` and of even size (30
    bars at 25 a chart: 15 and 15), a group's keys (a model's series) kept in one
    chart where they fit; a group larger than a chart fills charts of its own."""
    if not keys:
        return []
    size = math.ceil(len(keys) / math.ceil(len(keys) / limit))
    groups: dict[Hashable, list[Any]] = {}
    for k in keys:
        groups.setdefault(group(k), []).append(k)
    out: list[list[Any]] = [[]]
    for members in groups.values():
        if out[-1] and len(out[-1]) + len(members) > size:
            out.append([])
        for k in members:
            if len(out[-1]) >= size:
                out.append([])
            out[-1].append(k)
    return out


def part_title(title: str, index: int, count: int) -> str:
    return title if count == 1 else f"{title} ({index + 1} of {count})"


def distinct(keys: Sequence[tuple[str, ...]]) -> tuple[list[str], str]:
    """Each key's label from the fields that tell it from the others, and the fields every
    key shares as one line ("onnxruntime, cpu, fp32") to print once under the title.
    A lone key is labelled by its first field (the model), the rest said under the title."""
    width = max((len(k) for k in keys), default=0)
    padded = [tuple(k) + ("",) * (width - len(k)) for k in keys]
    shared = {i for i in range(width) if len({k[i] for k in padded}) == 1}
    if len(keys) == 1:
        shared.discard(0)
    labels = [", ".join(v for i, v in enumerate(k) if v and i not in shared) for k in padded]
    common = ", ".join(padded[0][i] for i in sorted(shared) if padded[0][i]) if padded else ""
    return labels, common


def shorten(labels: Sequence[str], limit: int = LABEL_CHARS) -> tuple[list[str], list[str]]:
    """Labels of at most ``limit`` characters, a long one cut in the middle ("resnet50-…
    onnxruntime, cpu") so both its model and its backend stay; and the key, one
    "short = full" line per cut label.  Two labels that cut alike get a number."""
    out, key, seen = [], [], set()
    for label in labels:
        short = label
        if len(label) > limit:
            head = (limit - 1) // 2
            short = f"{label[:head]}…{label[len(label) - (limit - 1 - head) :]}"
            n = 2
            while short in seen:
                short = f"{short[: limit - 4]}…#{n}"
                n += 1
            key.append(f"{short} = {label}")
        seen.add(short)
        out.append(short)
    return out, key


def new_figure(height: float):
    """A figure with constrained layout (it makes room for an outside legend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _titles(ax, title: str, common: str) -> None:
    ax.set_title(f"{title}\n{common}" if common else title, fontsize=10)


def line_figure(title: str, common: str, xlabel: str, ylabel: str, draw: Callable[[Any], None]):
    """A chart of lines or points: ``draw(ax)`` plots the labelled series; the legend
    goes below the axes in as many columns as the figure's width holds."""
    fig = new_figure(AXES_IN + FRAME_IN)
    ax = fig.add_subplot(1, 1, 1)
    draw(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    _titles(ax, title, common)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        renderer = fig.canvas.get_renderer()
        for ncols in range(len(handles), 0, -1):
            legend = fig.legend(
                handles, labels, loc="outside lower center", ncols=ncols, fontsize=FONT, frameon=False
            )
            if ncols == 1 or legend.get_window_extent(renderer).width <= 0.97 * fig.bbox.width:
                break
            legend.remove()
        rows = math.ceil(len(handles) / ncols)
        fig.set_size_inches(WIDTH_IN, AXES_IN + FRAME_IN + rows * LEGEND_ROW_IN + 0.15)
    return fig


def bar_figure(
    title: str,
    common: str,
    labels: Sequence[str],
    values: Sequence[float],
    xlabel: str,
    top: float | None = None,
):
    """Horizontal bars, top to bottom in the given order, each with its value at its end
    in four significant digits (``tables.num``, as the tables print it).  ``top``: the
    largest value of all the parts of a split chart, so their bars share one scale."""
    fig = new_figure(FRAME_IN + 0.2 + BAR_ROW_IN * max(len(labels), 2))
    ax = fig.add_subplot(1, 1, 1)
    rows = range(len(labels))
    bars = ax.barh(rows, values, height=0.7, color="#4878a8")
    ax.set_yticks(rows, labels, fontsize=FONT)
    ax.invert_yaxis()  # the first key on top, as a table reads
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_xlim(0, (top or max(values, default=1)) * 1.18 or 1)  # room for the longest's value
    ax.set_xlabel(xlabel)
    ax.grid(True, axis="x", alpha=0.3)
    _titles(ax, title, common)
    texts = ax.bar_label(bars, labels=[num(v) for v in values], padding=3, fontsize=FONT)
    keep_apart(fig, texts)
    return fig


def keep_apart(fig, texts) -> None:
    """Hide each text that would overlap one already kept, or leave the figure: a value
    that cannot be read is better left to the table than drawn over another."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    kept: list[Any] = []
    for t in texts:
        box = t.get_window_extent(renderer)
        outside = box.x0 < fig.bbox.x0 or box.x1 > fig.bbox.x1
        if outside or any(box.overlaps(k) for k in kept):
            t.set_visible(False)
        else:
            kept.append(box)


def _note(note: str, key: Sequence[str]) -> str:
    cut = f"Names cut short: {'; '.join(key)}." if key else ""
    return " ".join(filter(None, [note, cut]))


def _labels(keys: Sequence[tuple[str, ...]]) -> tuple[list[str], str, list[str]]:
    """A chart's labels and shared-fields line, each cut to its room, and their key."""
    labels, common = distinct(keys)
    short, key = shorten(labels)
    (common,), common_key = shorten([common], COMMON_CHARS)
    return short, common, key + common_key


def line_plots(
    title: str,
    keys: Sequence[tuple[str, ...]],
    draw: Callable[[Any, dict[tuple[str, ...], str]], None],
    axes: tuple[str, str],
    note: str = "",
) -> list[Plot]:
    """A line chart per ``SERIES_PER_CHART`` series (a model's together, the first
    field of a key): ``draw(ax, {key: label})`` plots the chart's series; ``axes`` are
    the x and y labels."""
    plots = []
    chunks = parts(keys, lambda k: k[0], SERIES_PER_CHART)
    for i, chunk in enumerate(chunks):
        short, common, key = _labels(chunk)
        name = part_title(title, i, len(chunks))

        labelled = dict(zip(chunk, short))
        build = partial(line_figure, name, common, *axes, partial(draw, labels=labelled))
        plots.append(Plot(name, build, _note(note, key)))
    return plots


def bar_plots(title: str, values: dict[tuple[str, ...], float], xlabel: str, note: str = "") -> list[Plot]:
    """A horizontal bar chart per ``BARS_PER_CHART`` bars (a model's together), all on
    one scale."""
    plots = []
    top = max(values.values(), default=None)
    chunks = parts(list(values), lambda k: k[0], BARS_PER_CHART)
    for i, chunk in enumerate(chunks):
        short, common, key = _labels(chunk)
        name = part_title(title, i, len(chunks))

        build = partial(bar_figure, name, common, short, [values[k] for k in chunk], xlabel, top)
        plots.append(Plot(name, build, _note(note, key)))
    return plots


def svg(fig) -> bytes:
    """The figure as SVG with its text as text (``svg.fonttype: none``), not as glyph
    outlines from this machine's fonts: a model named in Chinese, Japanese or Korean drew
    as empty boxes where no CJK font is installed (matplotlib ships none), and the
    browser has one.  Ids are salted by a constant so one report renders to one file."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "dlbench"}):
        fig.savefig(buf, format="svg")
    return buf.getvalue()


@contextlib.contextmanager
def _glyphs_drawn_elsewhere() -> Iterator[None]:
    """Layout still measures text with matplotlib's fonts, which warn once per glyph they
    lack; in SVG the browser draws those glyphs, so the warnings are noise in a report."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font")
        yield
