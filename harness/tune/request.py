"""What ``dlbench tune`` asks for.  Each field a flag sets declares it (``core.flags``):
the parser, ``--config`` keys and the docs come from here."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from dlbench.core.errors import UserError
from dlbench.core.flags import comma_list, field_of, flag, split
from dlbench.harness.store.context import DB

SEARCH = "search"
OBJECTIVES = ("throughput", "latency")
_UNITS = {"": 1.0, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _amount(text: str, unit: str, what: str) -> float:
    """``10m``, ``90s``, ``20ms``, or a bare number in ``unit``: seconds for a budget,
    milliseconds for a latency bound, the way people say them."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", str(text).lower())
    if not m or m.group(2) not in _UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what} (e.g. 10m, 90s, 20ms)")
    seconds = float(m.group(1)) * _UNITS[m.group(2) or unit]
    return seconds if unit == "s" else seconds * 1000


def duration(text: str) -> float:
    """A time budget in seconds."""
    return _amount(text, "s", "a duration")


def milliseconds(text: str) -> float:
    """A latency bound in milliseconds."""
    return _amount(text, "ms", "a latency")


duration.__name__, milliseconds.__name__ = "duration", "latency"


def space_entries(values: list[str]) -> dict[str, list[str]]:
    """``--space NAME=V1,V2`` (repeatable) -> {name: values}: a dimension narrowed, widened
    or fixed (one value); any backend option, threads, inter_op_threads, allocator, batch_size
    or build."""
    out: dict[str, list[str]] = {}
    for entry in values:
        name, sep, rest = str(entry).partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name or not split([rest]):
            raise UserError(f"--space {entry!r}: expected NAME=VALUE[,VALUE...]")
        out[name] = split([rest])
    return out


def space_texts(space: dict[str, list[str]]) -> list[str]:
    return [f"{k}={','.join(map(str, v))}" for k, v in space.items()]


@dataclass
class TuneRequest:
    target: str = flag(
        "target",
        metavar="MODEL_OR_FILE",
        help="a model file (ONNX, or a framework's file for its native backend) or a zoo name",
    )
    backends: list[str] = flag(
        "-b",
        "--backend",
        factory=lambda: ["onnxruntime"],
        type=comma_list(str),
        help="backends to tune, comma-separated; each searched apart (default {default})",
    )
    device: str = flag("--device", default="cpu", help="cpu or cuda (default {default})")
    budget_s: float = flag(
        "--budget",
        default=600.0,
        type=duration,
        group=SEARCH,
        help="wall time the whole search may take, e.g. 10m, 90s (default {default} s)",
    )
    max_p99_ms: float | None = flag(
        "--max-p99",
        default=None,
        type=milliseconds,
        group=SEARCH,
        help="the throughput objective's latency bound, e.g. 20ms: a point whose p99 exceeds "
        "it does not count",
    )
    objectives: list[str] = flag(
        "--objective",
        factory=lambda: list(OBJECTIVES),
        type=comma_list(str),
        group=SEARCH,
        help="throughput (samples/s, any batch size) and/or latency (p99 at batch 1); "
        "a best config per objective (default {default})",
    )
    batch_sizes: list[int] = flag(
        "--batch-sizes",
        factory=lambda: [1, 8, 32],
        type=comma_list(int),
        group=SEARCH,
        help="batch sizes the throughput objective tries (default {default})",
    )
    builds: list[str] | None = flag(
        "--builds",
        default=None,
        type=comma_list(str),
        group=SEARCH,
        help="build targets whose verified builds are searched as precisions (default: every "
        "target building for the device and a tuned backend's format; 'none': no build)",
    )
    space: dict[str, list[str]] = flag(
        "--space",
        factory=dict,
        many=True,
        group=SEARCH,
        metavar="NAME=V1,V2",
        read=space_entries,
        write=space_texts,
        help="set a dimension's values instead of the declared ones (one value fixes it): "
        "threads, inter_op_threads, allocator, batch_size, build, or a backend option",
    )
    eta: int = flag(
        "--eta",
        default=3,
        type=int,
        group=SEARCH,
        help="successive halving: each rung keeps 1/ETA of the points and measures them "
        "ETA times longer; the last measures its few points ETA times each, in turn, "
        "and ranks them by the median (default {default})",
    )
    out: str | None = flag(
        "--out",
        "-o",
        default=None,
        help="folder of the best configs (OBJECTIVE.toml) and builds (default tune/MODEL)",
    )
    db: str | None = field_of(DB, default=None)
    seed: int = flag("--seed", default=0, type=int, help="seed of the synthesized inputs (default {default})")
    timeout: float | None = flag(
        "--timeout", default=None, type=float, help="seconds per cell (default none)"
    )

    def check(self) -> None:
        if self.budget_s <= 0:
            raise UserError("--budget must be positive")
        if self.max_p99_ms is not None and self.max_p99_ms <= 0:
            raise UserError("--max-p99 must be positive")
        for o in self.objectives:
            if o not in OBJECTIVES:
                raise UserError(f"--objective must be among {', '.join(OBJECTIVES)}, got {o!r}")
        if not self.objectives:
            raise UserError("--objective: give at least one")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise UserError("--batch-sizes must be positive integers")
        if self.eta < 2:
            raise UserError(f"--eta must be at least 2, got {self.eta}")
        if not self.backends:
            raise UserError("--backend: give at least one")

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)
