"""Models by name from the ecosystem's libraries: ``timm:``, ``torchvision:``, ``hf:``, ``keras:``.

A user who wants "ConvNeXt-tiny as timm builds it" should not have to write a
``--model-from`` file that calls ``timm.create_model``; the name is the model.
Each source is declared once here (its prefix, framework, the package it needs
and the extra that installs it); help, the refusals and the docs read this
table.  Nothing here imports a framework: the parent only parses the name, and
the cell builds the model (``hub_torch``, ``hub_keras``).

Nothing is downloaded, ever: weights come from the libraries' local caches
when they are there, else the network is built with random weights and the
record says so (``weights``).  ``hf:`` takes a local directory holding a
``config.json`` or a model id already in the local Hugging Face cache; with
neither, the refusal is one line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from dlbench.core.errors import UserError
from dlbench.models.user import Source


@dataclass(frozen=True)
class Hub:
    prefix: str
    framework: str
    package: str  # the module that must import in the cell
    extra: str  # pip install 'dlbench[EXTRA]' brings it
    what: str
    example: str
    builder: str  # models.user.<builder> builds it, in the cell


HUBS: dict[str, Hub] = {
    h.prefix: h
    for h in (
        Hub(
            "timm",
            "pytorch",
            "timm",
            "ecosystem",
            "a timm model (timm.create_model)",
            "timm:convnext_atto",
            "hub_torch",
        ),
        Hub(
            "torchvision",
            "pytorch",
            "torchvision",
            "ecosystem",
            "a torchvision model (torchvision.models.get_model)",
            "torchvision:resnet18",
            "hub_torch",
        ),
        Hub(
            "hf",
            "pytorch",
            "transformers",
            "ecosystem",
            "a Hugging Face transformers model (AutoModel, from its config.json)",
            "hf:./my-bert",
            "hub_torch",
        ),
        Hub(
            "keras",
            "tensorflow",
            "keras",
            "tensorflow",
            "a keras.applications model",
            "keras:MobileNetV3Small",
            "hub_keras",
        ),
    )
}
# What the record says of weights a source built without: nothing at hand, nothing fetched.
RANDOM = "random (no local copy of its pretrained weights; nothing is downloaded)"


def prefixes(framework: str | None = None) -> str:
    """The sources (of one framework's models) as help and refusals name them: ``timm:NAME, ...``."""
    return ", ".join(
        f"{p}:NAME" if p != "hf" else "hf:DIR_OR_ID"
        for p, h in HUBS.items()
        if framework in (None, h.framework)
    )


def named(framework: str | None = None) -> str:
    """How help texts name these sources."""
    return f"a model by name ({prefixes(framework)})"


def parse(arg: str) -> Source | None:
    """The source ``arg`` names (``timm:resnet18``), or None when it names no hub.

    A file or directory of that name is the caller's to prefer: a path wins."""
    prefix, sep, name = arg.partition(":")
    hub = HUBS.get(prefix)
    if not sep or hub is None:
        return None
    if not name.strip():
        raise UserError(f"{arg}: give a model name after '{prefix}:' (for example {hub.example})")
    path = None
    if prefix == "hf" and (os.path.isdir(name) or name.startswith((".", "/", "~"))):
        directory = os.path.abspath(os.path.expanduser(name))
        if not os.path.isfile(os.path.join(directory, "config.json")):
            raise UserError(f"{arg}: {directory} holds no config.json (a Hugging Face model directory does)")
        path = directory
    return Source("hub", hub.framework, path=path, model_from=f"{prefix}:{name}")


def hub_of(source: Source) -> tuple[Hub, str]:
    prefix, _, name = (source.model_from or "").partition(":")
    return HUBS[prefix], name
