"""RoIAlign in MindSpore ops for ``models.maskrcnn.mindspore`` (its module doc says how
it reads the levels and why the ONNX export reads them differently), apart to keep
each module short."""

from __future__ import annotations

import math
import os

os.environ.setdefault("GLOG_v", "3")

import mindspore as ms
import numpy as np
from mindspore import nn, ops

from dlbench.models import maskrcnn as M


class RoIAlign(nn.Cell):
    """``reference.roi_align`` on every image's boxes at once, from the flattened levels
    (batch, cells, channels) to (batch, boxes, channels, size, size)."""

    def __init__(self, cfg: dict, size: int):
        super().__init__()
        ratio, sides = cfg["sampling_ratio"], M.level_sizes(cfg)
        self.size, self.ratio, self.canonical = size, ratio, float(cfg["canonical_size"])
        sides = [sides[lv] for lv in M.ROI_LEVELS]
        offsets = np.cumsum([0] + [s * s for s in sides[:-1]])
        table = np.array([[1.0 / M.stride(lv) for lv in M.ROI_LEVELS], sides, offsets], np.float32)
        self.levels = ms.Tensor(np.array(M.ROI_LEVELS, np.float32))
        self.table = ms.Tensor(table)  # (3, levels): 1/stride, side, offset
        self.steps = ms.Tensor(((np.arange(size * ratio) + 0.5) / ratio).astype(np.float32))
        self.lo, self.hi = float(M.ROI_LEVELS[0]), float(M.ROI_LEVELS[-1])
        # Row gathers on the batch-flattened table (False: ONNX export's GatherElements).
        self.rows = True
        self.base, self.inv_ln2 = float(M.CANONICAL_LEVEL), 1.0 / math.log(2.0)

    def _axis(self, start, end, side, n: int):
        """One axis of the sample grid, (B, N) box edges -> (B, N, Sr): low and high
        corner, their weights (zero outside the map), as reference.bilinear does it
        separably.  Axes are added by reshapes with a -1 batch: the exporter writes
        ExpandDims as a Reshape to the traced shape."""
        step = ops.reshape((end - start) / self.size, (-1, n, 1))
        p = ops.reshape(start, (-1, n, 1)) + step * self.steps
        side = ops.reshape(side, (-1, n, 1))
        inside = ops.cast(ops.logical_and(p >= -1.0, p <= side), ms.float32)
        p = ops.maximum(ops.minimum(p, side - 1.0), 0.0)
        low = ops.floor(p)
        high = ops.minimum(low + 1.0, side - 1.0)
        frac = p - low
        return low, high, (1.0 - frac) * inside, frac * inside

    def _corner(self, flat, cell, weight, wide, n: int, sr: int):
        """One bilinear corner of every sample of every box, whatever its level, read by
        one gather (module doc) and weighted: (B, N, Sr, Sr, C)."""
        if self.rows:
            b, cells = flat.shape[0], flat.shape[1]
            first = ops.reshape(ops.arange(0, b, dtype=ms.int32) * cells, (-1, 1))
            index = ops.reshape(ops.cast(cell, ms.int32), (-1, n * sr * sr)) + first
            v = ops.gather(ops.reshape(flat, (-1, flat.shape[2])), ops.reshape(index, (-1,)), 0)
        else:
            index = ops.reshape(ops.cast(cell, ms.int32), (-1, n * sr * sr, 1)) + wide
            v = ops.gather_elements(flat, 1, index)
        v = ops.reshape(v, (-1, n, sr, sr, flat.shape[2]))
        return v * ops.reshape(weight, (-1, n, sr, sr, 1))

    def construct(self, flat, boxes):
        n, s, r, c = boxes.shape[1], self.size, self.ratio, flat.shape[2]
        sr = s * r
        x0, y0, x1, y1 = boxes[:, :, 0], boxes[:, :, 1], boxes[:, :, 2], boxes[:, :, 3]
        scale = ops.sqrt(ops.maximum((x1 - x0) * (y1 - y0), 0.0))
        k = ops.floor(self.base + ops.log(scale / self.canonical + 1e-6) * self.inv_ln2)
        k = ops.maximum(ops.minimum(k, self.hi), self.lo)
        onehot = ops.cast(ops.equal(ops.reshape(k, (-1, n, 1)), self.levels), ms.float32)
        inv = ops.reduce_sum(onehot * self.table[0], -1)  # (B, N)
        side = ops.reduce_sum(onehot * self.table[1], -1)
        offset = ops.reduce_sum(onehot * self.table[2], -1)
        ylo, yhi, wylo, wyhi = self._axis(y0 * inv - 0.5, y1 * inv - 0.5, side, n)
        xlo, xhi, wxlo, wxhi = self._axis(x0 * inv - 0.5, x1 * inv - 0.5, side, n)
        # Rows as cells into the concatenated levels (B, N, Sr, 1); columns (B, N, 1, Sr).
        base, width = ops.reshape(offset, (-1, n, 1)), ops.reshape(side, (-1, n, 1))
        rows, cols = (-1, n, sr, 1), (-1, n, 1, sr)
        ylo, yhi = ops.reshape(base + ylo * width, rows), ops.reshape(base + yhi * width, rows)
        xlo, xhi = ops.reshape(xlo, cols), ops.reshape(xhi, cols)
        wylo, wyhi = ops.reshape(wylo, rows), ops.reshape(wyhi, rows)
        wxlo, wxhi = ops.reshape(wxlo, cols), ops.reshape(wxhi, cols)
        # One corner at a time keeps the largest temporaries at (B, N * Sr * Sr, C).
        wide = ops.zeros((1, 1, c), ms.int32)
        v = self._corner(flat, ylo + xlo, wylo * wxlo, wide, n, sr)
        v = v + self._corner(flat, ylo + xhi, wylo * wxhi, wide, n, sr)
        v = v + self._corner(flat, yhi + xlo, wyhi * wxlo, wide, n, sr)
        v = v + self._corner(flat, yhi + xhi, wyhi * wxhi, wide, n, sr)  # (B, N, Sr, Sr, C)
        v = ops.reduce_mean(ops.reshape(v, (-1, n, s, r, s, r, c)), (3, 5))  # (B, N, S, S, C)
        return ops.transpose(v, (0, 1, 4, 2, 3))
