"""Framework-neutral weights: one canonical format, per-framework export and import.

A network trained in one framework can be loaded into the same network built in
another (``models.weights.<framework>.export_weights(net)`` then
``models.weights.<other>.import_weights(net, weights)``), which is how dlbench
shows that its PyTorch, Keras and MindSpore implementations compute the same
function, and how the same weights can be benchmarked on every framework.

The canonical format
--------------------
An ordered ``dict`` name -> float32 ``numpy`` array in PyTorch's names and
layouts (in the exporting framework's layer order; readers match by name):

* ``<layer>.weight`` / ``<layer>.bias`` of a conv: (out, in/groups, kH, kW);
  of a dense/linear layer: (out, in);
* batch norm: ``<layer>.weight`` (gamma), ``.bias`` (beta), ``.running_mean``,
  ``.running_var`` (PyTorch's ``num_batches_tracked`` is a counter, not a
  weight, and is left out);
* ``<layer>`` is the layer's PyTorch module path (``layer1.0.conv1``,
  ``inception3a.branch2.1.bn``).  On disk it is an ``.npz`` (``save``/``load``)
  with one extra entry, ``__meta__``, a JSON string (format, model, source).

How layers are matched: by name
-------------------------------
Every zoo builder gives each weighted layer the same name in every framework,
its PyTorch module path: a Keras layer is *named* ``layer1.0.conv1``, a
MindSpore Cell sits at attribute path ``layer1.0.conv1`` (so its parameters are
``layer1.0.conv1.weight``).  Names, not traversal order, because Keras lists a
functional model's layers in graph order, which differs from PyTorch's module
order wherever branches run in parallel (inception blocks, shortcuts).  Each
framework module finds the layer name as follows:

* PyTorch: the path from ``named_modules()``;
* Keras: ``layer.name``; a layer inside a nested model or a composite layer
  gets the container's name and a dot in front, unless its own name already
  starts with that (name sub-layers fully, e.g. ``encoder.0.attention.query``);
* MindSpore: the path from ``cells_and_names()`` (attribute names of Cells,
  indices inside ``SequentialCell``/``CellList``).

Import is strict: every canonical array must find its layer and every weighted
layer its arrays, with identical shapes after conversion; anything else raises
``WeightMismatch`` naming the first offenders.  A weighted layer of a type with
no rule is an error too, never silently skipped.

Adding a layer type
-------------------
Each framework module has ONE table, ``RULES``: layer class -> ``Rule``
(``models.weights.rules``).  A rule lists the layer's arrays as ``Param``\\ s:
canonical suffix, native attribute, and the two layout conversions; a layer
whose arrays do not map one to one (fused LSTM gates, a Keras layer with one
bias where PyTorch has two) gives ``export``/``load`` functions instead.  Add
the same layer to all three tables, with the PyTorch names as canonical.
Lookup follows the class's MRO, so subclasses inherit their base's rule.

Known limit: a dense layer fed by a *flatten* of a feature map would need its
input rows permuted between NCHW and NHWC; the zoo's CNNs pool globally first,
and no rule does that permutation.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from dlbench.core.atomic import ensure_writable
from dlbench.core.errors import UserError
from dlbench.core.frameworks import NAMES, get_framework

FORMAT = "dlbench-weights/1"
META_KEY = "__meta__"
FRAMEWORKS = NAMES

Weights = "OrderedDict[str, np.ndarray]"


class WeightMismatch(UserError):
    """The weights do not fit the network (names, shapes, or a layer type without a rule)."""


def module(framework: str):
    """The export/import module of ``framework`` (imports that framework)."""
    import importlib

    get_framework(framework)  # an unknown one is a UserError naming the choices
    return importlib.import_module(f"dlbench.models.weights.{framework}")


def save(path: str | os.PathLike, weights: dict[str, np.ndarray], **meta: Any) -> Path:
    """Write ``weights`` as an uncompressed ``.npz``, atomically (temp file, then rename)."""
    path = ensure_writable(path)
    if META_KEY in weights:
        raise ValueError(f"{META_KEY!r} is reserved for the file's metadata")
    arrays = {name: np.ascontiguousarray(a) for name, a in weights.items()}
    arrays[META_KEY] = np.array(json.dumps({"format": FORMAT, **meta}, sort_keys=True))
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | os.PathLike) -> tuple[OrderedDict[str, np.ndarray], dict[str, Any]]:
    """(weights in file order, metadata) of a file ``save`` wrote; UserError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            if META_KEY not in data.files:
                raise UserError(f"{path}: not a dlbench weights file (no {META_KEY})")
            meta = json.loads(str(data[META_KEY]))
            weights = OrderedDict((k, data[k]) for k in data.files if k != META_KEY)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise UserError(f"{path}: not a readable .npz weights file ({exc})") from None
    if meta.get("format") != FORMAT:
        raise UserError(f"{path}: weights format {meta.get('format')!r}, expected {FORMAT}")
    return weights, meta
