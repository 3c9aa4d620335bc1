"""Data-set readers for ``dlbench train --data``: one module per format, chosen here.

The rule for ``--data VALUE`` (also in ``dlbench train --help``):
  * ``synthetic`` (default) -- generated before the clock (``models.synthetic``);
  * ``digits`` -- the 8x8 UCI digits shipped with dlbench, no download (``digits``);
  * ``FORMAT:PATH`` -- force a reader: ``cifar10``, ``imagefolder``, ``aclimdb``,
    ``text``, ``parallel``, ``ctr``, ``librispeech``, ``voc``, ``coco`` or ``npz``;
  * otherwise PATH, detected in this order: a ``.npz`` file -> npz; a file
    ``train.XX`` with one ``train.YY`` beside it -> parallel (translation
    source and target); a ``.txt`` file -> text (BERT pre-training corpus); a directory with
    ``data_batch_*.bin`` (or ``cifar-10-batches-bin/`` holding them) -> cifar10;
    one with ``train/pos`` and ``train/neg`` -> aclimdb; one with
    ``local_train_splitByUser`` -> ctr (DIN's click logs); one with
    ``Annotations/``, ``JPEGImages/`` and ``ImageSets/Main/`` -> voc; one with
    ``annotations/instances_train*.json`` -> coco (both detection, for SSD, COCO's masks
    also for Mask R-CNN, and before imagefolder, which would take their image folders
    for classes); one with class sub-folders of images (under ``train/`` or directly)
    -> imagefolder; one with ``*.trans.txt`` transcripts beside .flac or .wav files ->
    librispeech (DeepSpeech2).
Nothing is ever downloaded: PATH is data the user already has.  A user's own
model (``dlbench train --model-from``) reads synthetic data or an .npz in its
signature's shape (``signature``).
"""
from __future__ import annotations

from pathlib import Path

from dlbench.harness.data import (aclimdb, cifar10, coco, ctr, imagefolder, librispeech, npz,
                                  parallel, textcorpus, voc)
from dlbench.harness.data.base import Dataset
from dlbench.core.errors import UserError
from dlbench.models.registry import USER_FAMILY, ModelSpec

# Formats that take a PATH, in detection order.
FORMATS = {
    "npz": (npz.looks_like, npz.Npz),
    "parallel": (parallel.looks_like, parallel.ParallelText),
    "text": (textcorpus.looks_like, textcorpus.TextCorpus),
    "cifar10": (cifar10.looks_like, cifar10.Cifar10),
    "aclimdb": (aclimdb.looks_like, aclimdb.AclImdb),
    "ctr": (ctr.looks_like, ctr.ClickLog),
    "voc": (voc.looks_like, voc.Voc),
    "coco": (coco.looks_like, coco.Coco),
    "imagefolder": (imagefolder.looks_like, imagefolder.ImageFolder),
    # Last: its look searches a few folder levels for transcripts.
    "librispeech": (librispeech.looks_like, librispeech.LibriSpeech),
}
NAMED = ("synthetic", "digits")


def parse(data: str) -> tuple[str, Path | None]:
    """(format, path) for a ``--data`` value; detection needs the path to exist."""
    if data in NAMED:
        return data, None
    fmt, sep, rest = data.partition(":")
    if sep and fmt in FORMATS:
        if not rest:
            raise UserError(f"--data {data}: no path after '{fmt}:'")
        return fmt, Path(rest).expanduser()
    path = Path(data).expanduser()
    if not path.exists():
        raise UserError(f"--data {data}: no such file or directory (use synthetic, digits, "
                        f"a path, or FORMAT:PATH with FORMAT one of {', '.join(FORMATS)})")
    for fmt, (looks_like, _) in FORMATS.items():
        if looks_like(path):
            return fmt, path
    raise UserError(f"--data {data}: format not recognized (want an .npz, a train.XX/train.YY "
                    "parallel pair, a .txt corpus, a CIFAR-10 binary directory, an aclImdb "
                    "directory, DIN click logs (local_train_splitByUser), a PASCAL VOC or COCO "
                    "directory, LibriSpeech-style wav + .trans.txt folders or class folders of "
                    "images; or say FORMAT:PATH)")


def canonical(data: str) -> str:
    """The ``--data`` value as recorded: named sets as they are, paths made absolute
    (a plain path stays plain: its format is detected again the same way)."""
    fmt, path = parse(data)
    if path is None:
        return fmt
    explicit = data.startswith(f"{fmt}:")
    return f"{fmt}:{path.resolve()}" if explicit else str(path.resolve())


def open_dataset(data: str, spec: ModelSpec) -> Dataset:
    """The reader for ``data``, checked against ``spec`` (cheap: nothing decoded yet)."""
    fmt, path = parse(data)
    if spec.family == USER_FAMILY:          # a user's model: data in its signature's shape
        from dlbench.harness.data.signature import open_signature
        return open_signature(fmt, path, spec)
    if fmt == "synthetic":
        from dlbench.harness.data.synthetic import Synthetic
        return Synthetic(spec)
    if fmt == "digits":
        from dlbench.harness.data.digits import Digits
        return Digits(spec)
    if not path.exists():
        raise UserError(f"--data {data}: no such file or directory")
    return FORMATS[fmt][1](spec, path)
