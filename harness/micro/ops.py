"""The operations ``dlbench micro`` times: GEMM, convolution and memory streams.

An op is plain data (shape, no framework), so the parent plans cells, counts
FLOPs and bytes, and names records without importing anything; each engine
builds the op in its own cell (``harness.micro.engines``).

Shape strings, as the user types them:

* GEMM ``MxKxN`` (``A[M,K] @ B[K,N]``) or ``N`` for a square one;
* convolution ``NxCxHxW:KkR[sS]``: batch N, C input channels, HxW input, K
  output channels, an RxR kernel, stride S (default 1), padding R//2 ("same"
  at stride 1, as the zoo's networks pad);
* memory ``MiB``: the size of each array of the stream (copy ``c = a``,
  triad ``a = b + s*c``, as STREAM defines them).

The default lists mix sizes that show a library's peak with shapes real
networks run (the zoo's walks), because the two can differ by several times.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import asdict, dataclass
from typing import Any

from dlbench.core.errors import UserError

KINDS = ("gemm", "conv", "memory")
MEMORY_KERNELS = ("copy", "triad")
ITEMSIZE = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "int8": 1}
MIB = 1 << 20


@dataclass(frozen=True)
class Op:
    kind: str
    dims: tuple[int, ...]  # gemm (M, K, N); conv (N, C, H, W, K, R, S); memory (elements,)
    kernel: str = ""  # memory: copy | triad
    origin: str = ""  # where a default shape comes from (a zoo layer), for tables

    @property
    def label(self) -> str:
        """The record's ``model`` column: the op and its shape, as the user would type it."""
        if self.kind == "gemm":
            return "gemm " + "x".join(map(str, self.dims))
        if self.kind == "conv":
            n, c, h, w, k, r, s = self.dims
            return f"conv {n}x{c}x{h}x{w}:{k}k{r}" + (f"s{s}" if s != 1 else "")
        return f"{self.kernel} {self.dims[0] * 4 // MIB}MiB"

    def out_hw(self) -> tuple[int, int]:
        n, c, h, w, k, r, s = self.dims
        pad = r // 2
        return (h + 2 * pad - r) // s + 1, (w + 2 * pad - r) // s + 1

    def flops(self) -> int:
        """Floating-point operations of one call (a multiply-add counts two)."""
        if self.kind == "gemm":
            m, k, n = self.dims
            return 2 * m * k * n
        if self.kind == "conv":
            n, c, _, _, k, r, _ = self.dims
            oh, ow = self.out_hw()
            return 2 * n * k * oh * ow * c * r * r
        return 2 * self.dims[0] if self.kernel == "triad" else 0

    def bytes_moved(self, precision: str) -> int:
        """The bytes one call must read and write at least (each tensor once)."""
        size = ITEMSIZE[precision]
        if self.kind == "gemm":
            m, k, n = self.dims
            return size * (m * k + k * n) + (4 if precision == "int8" else size) * m * n
        if self.kind == "conv":
            n, c, h, w, k, r, _ = self.dims
            oh, ow = self.out_hw()
            return size * (n * c * h * w + k * c * r * r + n * k * oh * ow)
        arrays = 2 if self.kernel == "copy" else 3
        return arrays * self.dims[0] * size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Op:
        """The op a payload describes (a layer is ``harness.micro.layers.Layer``'s)."""
        return cls(d["kind"], tuple(d["dims"]), d.get("kernel", ""), d.get("origin", ""))


_GEMM = re.compile(r"^(\d+)(?:x(\d+)x(\d+))?$")
_CONV = re.compile(r"^(\d+)x(\d+)x(\d+)x(\d+):(\d+)k(\d+)(?:s(\d+))?$")


def parse(kind: str, text: str) -> list[Op]:
    """The op(s) a ``--shape`` names; a memory size gives both STREAM kernels."""
    text = text.strip().lower()
    if kind == "gemm":
        m = _GEMM.match(text)
        if not m:
            raise UserError(
                f"--shape {text!r}: a GEMM shape is MxKxN (A[M,K] @ B[K,N]) or N "
                f"for NxNxN, e.g. 2048 or 32x2048x1000"
            )
        dims = (int(m[1]),) * 3 if m[2] is None else (int(m[1]), int(m[2]), int(m[3]))
        ops = [Op("gemm", dims)]
    elif kind == "conv":
        m = _CONV.match(text)
        if not m:
            raise UserError(
                f"--shape {text!r}: a convolution is NxCxHxW:KkR[sS] (batch, input "
                f"channels, height, width : output channels, kernel size, stride), "
                f"e.g. 16x64x56x56:64k3 or 1x3x224x224:64k7s2"
            )
        ops = [Op("conv", tuple(int(g) for g in m.groups(default="1")))]
    else:
        try:
            mib = float(text.removesuffix("mib"))
        except ValueError:
            mib = -1
        if mib <= 0:
            raise UserError(f"--shape {text!r}: a memory stream is the MiB of each array, e.g. 64")
        ops = [Op("memory", (int(mib * MIB) // 4,), k) for k in MEMORY_KERNELS]
    for op in ops:
        if min(op.dims) <= 0:
            raise UserError(f"--shape {text!r}: every size must be positive")
        if op.kind == "conv" and min(op.out_hw()) <= 0:
            raise UserError(f"--shape {text!r}: the kernel is larger than the padded input")
    return ops


# Sizes that show each library's peak, then shapes the zoo's networks run:
# ResNet-50's classifier at batch 32, BERT-base's feed-forward on 8 x 128 tokens.
DEFAULT_GEMM = ("256", "512", "1024", "2048", "32x2048x1000", "1024x768x3072")
# The 3x3 convolution of ResNet-50's first stage at batch 16 (the shape MindSpore
# 2.9/2.10 run ~180x slower on a CPU than 2.8), and ResNet-50's stem.
DEFAULT_CONV = ("16x64x56x56:64k3", "1x3x224x224:64k7s2")
# Beyond every cache level of the machines this runs on.
DEFAULT_MEMORY = ("64",)
DEFAULTS = {"gemm": DEFAULT_GEMM, "conv": DEFAULT_CONV, "memory": DEFAULT_MEMORY}


def walk_of(model: str):
    """(spec, its family's walk in network order): the framework-free description every
    zoo family gives of its layers (``models.walkcount``, the token families' own)."""
    from dlbench.models.registry import get_model

    spec = get_model(model)
    family = importlib.import_module(f"dlbench.models.{spec.family}")
    walk = getattr(family, "walk", None)
    if walk is None:
        raise UserError(f"{model}: its family has no layer walk to take shapes from")
    return spec, list(walk(spec.config))


def conv_dims(layer: tuple, batch: int) -> tuple[int, ...] | None:
    """A walk's ("conv", cin, cout, k, stride, out_hw) as NxCxHxW:KkRsS dims: the walk
    keeps the output size, and "same" padding gives the input size back.  None for a
    named, unpadded one (LeNet's ("conv", name, cin, cout, k, out_hw)): micro's
    convolutions pad R//2, and an unpadded one is another layer."""
    if isinstance(layer[1], str):
        return None
    _, cin, cout, k, stride, out_hw = layer
    return (batch, cin, out_hw * stride, out_hw * stride, cout, k, stride)


def fc_dims(layer: tuple, batch: int) -> tuple[int, int, int]:
    """A walk's ("fc", [name,] in, out) as a BxIxO GEMM."""
    return (batch, *layer[-2:])


def from_model(kind: str, model: str, batch: int) -> list[Op]:
    """The distinct GEMM or convolution shapes of a zoo network at ``batch``, from its
    family's walk, in network order."""
    if kind == "memory":
        raise UserError("--model gives GEMM and convolution shapes; memory streams have none")
    _, walk = walk_of(model)
    seen: dict[tuple, Op] = {}
    for layer in walk:
        if kind == "conv" and layer[0] == "conv":
            dims = conv_dims(layer, batch)
        elif kind == "gemm" and layer[0] == "fc":
            dims = fc_dims(layer, batch)
        else:
            continue
        if dims is None:
            continue
        seen.setdefault(dims, Op(kind, dims, origin=model))
    if not seen:
        raise UserError(
            f"{model}: its walk has no {'convolution' if kind == 'conv' else 'dense'} "
            f"layers micro can run (its convolutions pad R//2)"
        )
    return list(seen.values())
