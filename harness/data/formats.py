"""The data formats ``dlbench train --data`` (and ``dlbench eval --data``) read, declared once.

The formats used to be listed in four places -- the dispatch table, the
``--data`` help, the README and the package docstring -- and the copies
disagreed (ten, seven, six).  Each is now one ``DataFormat`` in
``DATA_FORMATS``; the dispatch (``harness.data``), the help and the docs' data-format
table (``markdown_table``, rendered into the page as the site builds: ``harness.docs``)
read it.

A declaration names its reader and its recognizer as ``"module:attribute"``
strings, so listing the formats (``dlbench train --help``) imports no reader,
and this module imports none of its siblings: the readers never need it.

Declaration order is detection order: a path is given to the first format
whose recognizer accepts it.  It matters where layouts overlap: COCO and VOC
keep their images in class-like folders that imagefolder would take, and
librispeech's recognizer searches a few folder levels, so it goes last.  A
plugin's format (``core.registry``: ``DLBENCH_PLUGINS``) comes after them::

    DATA_FORMATS.register("mine", DataFormat(
        "mine", "my arrays: one .bin per split", "mypkg.reader:MyReader",
        recognizer="mypkg.reader:looks_like", recognized="a directory with train.bin"))

A reader is a ``harness.data.base.Dataset`` class called as ``reader(spec, path)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dlbench.core.registry import Registry, resolve

if TYPE_CHECKING:  # the readers' base, for annotations only
    from dlbench.harness.data.base import Dataset
    from dlbench.models.registry import ModelSpec


@dataclass(frozen=True)
class DataFormat:
    """One ``--data`` format.  ``description`` and ``recognized`` are one line each, in
    Markdown (backticks), because the docs' table shows them as written."""

    name: str
    description: str  # what it reads (files and layout), or what it makes
    reader: str  # "module:Dataset subclass", imported when opened
    recognizer: str | None = None  # "module:function(Path) -> bool"; None: never detected
    recognized: str = ""  # what the recognizer looks for, in words
    named: bool = False  # ``--data NAME`` alone, no path (synthetic, digits)

    def reader_class(self) -> type[Dataset]:
        return resolve(self.reader)

    def open(self, spec: ModelSpec, path: Path | None) -> Dataset:
        return self.reader_class()(spec, path)

    def recognizes(self, path: Path) -> bool:
        return self.recognizer is not None and bool(resolve(self.recognizer)(path))

    def how_chosen(self) -> str:
        """How ``--data`` picks this format without ``FORMAT:PATH``, in Markdown."""
        if self.named:
            return f"`--data {self.name}`"
        return self.recognized if self.recognizer else f"only as `{self.name}:PATH`"


DATA_FORMATS: Registry[DataFormat] = Registry("data format")


def _declare(
    name: str, description: str, module: str, reader: str, recognized: str = "", *, named: bool = False
) -> None:
    """A format of dlbench's own: its reader is ``module``'s ``reader`` class and, unless
    ``named``, its recognizer that module's ``looks_like``."""
    module = f"dlbench.harness.data.{module}"
    DATA_FORMATS.register(
        name,
        DataFormat(
            name,
            description,
            f"{module}:{reader}",
            recognizer=None if named else f"{module}:looks_like",
            recognized=recognized,
            named=named,
        ),
    )


_declare(
    "synthetic",
    "no files: samples made before the clock, each class its own pattern; the default, its data time zero",
    "synthetic",
    "Synthetic",
    named=True,
)
_declare(
    "digits",
    "the 1,797 8x8 UCI handwritten digits shipped with dlbench, no download; "
    "a fixed stratified 80/20 split, upsampled to the model's input",
    "digits",
    "Digits",
    named=True,
)
_declare(
    "npz",
    "arrays `x` (N, C, H, W) and `y` (N,) labels, optional `x_test`/`y_test` held "
    "out (a model of your own: an array per input, named like it)",
    "npz",
    "Npz",
    "a `.npz` file",
)
_declare(
    "parallel",
    "translation pairs: `train.XX` source and `train.YY` target, one sentence "
    "a line, `valid.*`/`dev.*`/`test.*` held out (GNMT)",
    "parallel",
    "ParallelText",
    "a file `train.XX` with one `train.YY` beside it",
)
_declare(
    "text",
    "BERT pre-training corpus: a sentence per line, a blank line between "
    "documents; masked-LM and next-sentence pairs made per step",
    "textcorpus",
    "TextCorpus",
    "a `.txt` file",
)
_declare(
    "cifar10",
    "CIFAR-10 binary batches: `data_batch_*.bin`, `test_batch.bin` held out",
    "cifar10",
    "Cifar10",
    "a directory with `data_batch_*.bin`, or with `cifar-10-batches-bin/` holding them",
)
_declare(
    "aclimdb",
    "movie reviews for sentiment: `train/{pos,neg}/*.txt`, `test/` held out",
    "aclimdb",
    "AclImdb",
    "a directory with `train/pos/` and `train/neg/`",
)
_declare(
    "ctr",
    "DIN's click logs: tab-separated `local_train_splitByUser`, `local_test_splitByUser` held out",
    "ctr",
    "ClickLog",
    "a directory with `local_train_splitByUser`",
)
_declare(
    "voc",
    "PASCAL VOC detection (SSD): `Annotations/*.xml`, `JPEGImages/*.jpg`, `ImageSets/Main/*.txt`",
    "voc",
    "Voc",
    "a directory with `Annotations/`, `JPEGImages/` and `ImageSets/Main/`",
)
_declare(
    "coco",
    "COCO boxes and masks (SSD, Mask R-CNN): `annotations/instances_*.json`, "
    "images in `train2017/`, `val2017/`",
    "coco",
    "Coco",
    "a directory with `annotations/instances_train*.json`",
)
_declare(
    "imagefolder",
    "ImageNet-style class folders: `train/<class>/*.JPEG`, optional `val/`, or `<class>/*.jpg`",
    "imagefolder",
    "ImageFolder",
    "a directory of class folders of images, under `train/` or directly",
)
_declare(
    "librispeech",
    "speech (DeepSpeech2): `*.trans.txt` transcripts beside `.flac` or "
    "`.wav` files, `dev*`/`test*` folders held out",
    "librispeech",
    "LibriSpeech",
    "a directory with `*.trans.txt` files up to four folders down",
)


def _plain(markdown: str) -> str:
    """Help text from Markdown: no backticks, and ``%`` escaped for argparse."""
    return markdown.replace("`", "").replace("%", "%%")


def help_text() -> str:
    """``--data``'s help, from the declarations: how each format is chosen (what each
    reads is the docs' data-format table, too long for a terminal)."""
    formats = DATA_FORMATS.all()
    named = [f"{f.name} ({f.description})" for f in formats if f.named]
    detected = ", ".join(f"{f.name} ({f.recognized})" for f in formats if f.recognizer)
    forced = ", ".join(f.name for f in formats if not f.named)
    return _plain(
        "; ".join(
            named
            + [
                f"or PATH to data you have, its format the first of these that recognizes it: "
                f"{detected}. FORMAT:PATH forces a reader ({forced}). Nothing is downloaded. Real "
                f"data is read per step; its time is reported as data time, apart from the step"
            ]
        )
    )


def markdown_table() -> str:
    """The table of formats on the docs' data-format page (``harness.docs`` renders it there
    at build time, so the page cannot drift from the declarations)."""
    rows = ["| `--data` | Reads | Recognized by |", "|---|---|---|"]
    rows += [f"| `{f.name}` | {_cell(f.description)} | {_cell(f.how_chosen())} |" for f in DATA_FORMATS.all()]
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
