"""keras.applications models built by name, in the cell (imports Keras).

The application's own default input size is used (its functional model declares
it), preprocessing layers included as Keras builds them.  Keras would download
ImageNet weights on request; dlbench asks for none, so the network has random
weights, and the record says so.
"""

from __future__ import annotations

import difflib
from typing import Any

from dlbench.core.errors import UserError
from dlbench.models.user import Source
from dlbench.models.user.code import SEED, seed_frameworks
from dlbench.models.user.hub import RANDOM, hub_of


def applications() -> dict[str, Any]:
    """The model builders keras.applications exports, by their public name."""
    import keras

    apps = keras.applications
    return {
        n: getattr(apps, n)
        for n in dir(apps)
        if n[:1].isupper() and callable(getattr(apps, n)) and not isinstance(getattr(apps, n), type)
    }


def build(source: Source) -> tuple[Any, dict[str, Any]]:
    import keras

    _, name = hub_of(source)
    known = applications()
    if name not in known:
        near = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
        hint = f" (did you mean {', '.join(near)}?)" if near else ""
        raise UserError(f"{source.label}: keras {keras.__version__}'s applications have no {name!r}{hint}")
    seed_frameworks(SEED)  # the same random weights in every cell, as for --model-from code
    model = known[name](weights=None)
    if any(d is None for d in model.inputs[0].shape[1:]):
        # Built without weights, some applications leave the image size open; the size
        # their ImageNet weights were trained at is the one their users run.
        side = DEFAULT_SIZES.get(name, 224)
        seed_frameworks(SEED)
        model = known[name](weights=None, input_shape=(side, side, 3))
    return model, {"weights": RANDOM, "notes": []}


# keras.applications' documented input sizes where they are not 224 (keras.io/api/applications).
DEFAULT_SIZES = {
    "InceptionV3": 299,
    "InceptionResNetV2": 299,
    "Xception": 299,
    "NASNetLarge": 331,
    "EfficientNetB1": 240,
    "EfficientNetB2": 260,
    "EfficientNetB3": 300,
    "EfficientNetB4": 380,
    "EfficientNetB5": 456,
    "EfficientNetB6": 528,
    "EfficientNetB7": 600,
    "EfficientNetV2B1": 240,
    "EfficientNetV2B2": 260,
    "EfficientNetV2B3": 300,
    "EfficientNetV2S": 384,
    "EfficientNetV2M": 480,
    "EfficientNetV2L": 480,
}
