"""COCO instance masks in numpy, drawn straight at the model's square input.

COCO gives a non-crowd object's ``segmentation`` as polygons (a list of flat
[x1, y1, x2, y2, ...] lists in image pixels, the object being their union) and a
crowd's as run-length encoding (RLE).  Polygons are scaled to the input and filled
by the even-odd rule at pixel centres (no pycocotools: it is not a dependency);
uncompressed RLE (``{"counts": [ints], "size": [h, w]}``, runs of 0 then 1 down
the columns) and compressed RLE (``counts`` a string, what pycocotools writes:
each run in 5-bit groups, least significant first, one printable character each,
runs after the second coded as the difference from the run two before) are
decoded at the image's size and sampled at the input's pixel centres.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def problem(seg: Any) -> str | None:
    """Why ``seg`` cannot be read (None when it can)."""
    if isinstance(seg, list):
        if not seg or not all(isinstance(p, list) and len(p) >= 6 and len(p) % 2 == 0 for p in seg):
            return "polygons must be lists of at least three x, y pairs"
        return None
    if isinstance(seg, dict) and "counts" in seg and "size" in seg:
        kind = "compressed" if isinstance(seg["counts"], str) else "uncompressed"
        try:
            counts = rle_counts(seg["counts"])
            height, width = (int(v) for v in seg["size"])
        except ValueError as e:
            if kind == "compressed":
                return f"compressed RLE that does not decode ({e})"
            return "RLE whose counts are not whole numbers, or whose size is not [height, width]"
        except TypeError:
            return "RLE 'counts' must be a string or a list of run lengths"
        if min(counts, default=0) < 0 or sum(counts) != height * width:
            return f"{kind} RLE whose runs do not add up to its size"
        return None
    return "want polygons (a list of coordinate lists) or RLE ({'counts', 'size'})"


def polygon_mask(xy: np.ndarray, height: int, width: int) -> np.ndarray:
    """(height, width) bool: pixels whose centre lies inside the polygon ``xy`` (K, 2),
    by the even-odd rule (crossings to the left of the centre, edges half-open in y)."""
    x0, y0 = xy[:, 0], xy[:, 1]
    x1, y1 = np.roll(x0, -1), np.roll(y0, -1)
    yc = np.arange(height)[:, None] + 0.5
    crosses = (y0 <= yc) != (y1 <= yc)  # (H, edges)
    with np.errstate(divide="ignore", invalid="ignore"):
        xi = np.where(crosses, x0 + (yc - y0) * (x1 - x0) / (y1 - y0), np.inf)
    xi.sort(1)
    xc = np.arange(width) + 0.5
    left = np.stack([np.searchsorted(row, xc) for row in xi])  # crossings left of it
    return (left % 2) == 1


def rle_counts(counts: str | list[int]) -> list[int]:
    """Run lengths of RLE ``counts``: a list as it is, a compressed string decoded."""
    if not isinstance(counts, str):
        return [int(c) for c in counts]
    runs: list[int] = []
    value = shift = 0
    for ch in counts:
        c = ord(ch) - 48
        if not 0 <= c < 64:
            raise ValueError(f"character {ch!r} is outside its alphabet")
        value |= (c & 0x1F) << shift
        shift += 5
        if c & 0x20:  # more groups follow
            continue
        if c & 0x10:  # the last group's top bit: negative
            value -= 1 << shift
        runs.append(value + (runs[-2] if len(runs) > 2 else 0))
        value = shift = 0
    if shift:
        raise ValueError("it ends inside a run")
    return runs


def rle_mask(counts, height: int, width: int) -> np.ndarray:
    """(height, width) bool from uncompressed RLE: alternating runs of 0 and 1, first 0,
    in column-major (Fortran) order."""
    values = np.arange(len(counts)) % 2 == 1
    return np.repeat(values, counts).reshape(width, height).T


def instance_mask(seg: Any, image_w: float, image_h: float, size: int) -> np.ndarray:
    """(size, size) float32 0/1: the object's mask on the image warped to size x size."""
    if isinstance(seg, list):
        out = np.zeros((size, size), bool)
        scale = np.array([size / image_w, size / image_h])
        for poly in seg:
            out |= polygon_mask(np.asarray(poly, np.float64).reshape(-1, 2) * scale, size, size)
        return out.astype(np.float32)
    h, w = (int(v) for v in seg["size"])
    full = rle_mask(np.asarray(rle_counts(seg["counts"]), np.int64), h, w)
    rows = np.minimum(((np.arange(size) + 0.5) * h / size).astype(np.int64), h - 1)
    cols = np.minimum(((np.arange(size) + 0.5) * w / size).astype(np.int64), w - 1)
    return full[rows][:, cols].astype(np.float32)
