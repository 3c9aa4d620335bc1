"""A backend that misbehaves on request, so the sweep's failure paths run for real.

Not listed by ``dlbench backends``; tests reach it with ``--backend
selftest``.  It takes an ONNX file (for its input signature), "runs" a batch
by sleeping ``service_ms + per_sample_ms * batch`` (optionally jittered) —
a model with a known service time — and on request raises, refuses, hangs, crashes
or pretends to have run on another device, only in cells whose batch is
``fail_batch`` (0: every cell), so one sweep mixes good and bad cells.
``touch_mib`` allocates, fills and frees that many MiB in every run, as an
eager framework does with its activations: whether the pages fault in again
each time is the allocator's doing (``--allocator``), and shows as kernel time.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from dlbench.core.errors import UserError
from dlbench.harness.backends.base import ArtifactRef, Backend, Option, RunConfig, Runner, TensorInfo, region
from dlbench.harness.formats import ONNX


class SelftestRunner(Runner):
    def load(self) -> None:
        import numpy as np

        from dlbench.harness.bench import onnxinfo

        self._inputs, _ = onnxinfo.signature(onnxinfo.load(self.artifact.path))
        self.rng = np.random.default_rng(self.cfg.seed)
        self.batch = 0

    def inputs(self) -> list[TensorInfo]:
        return self._inputs

    def prepare(self, feeds: dict[str, Any]) -> Any:
        first = next(iter(feeds.values()))
        return int(first.shape[0]) if first.ndim else 1

    def _misbehave(self, batch: int) -> None:
        o = self.cfg.options
        if o["fail"] == "none" or o["fail_batch"] not in (0, batch):
            return
        if o["fail"] == "raise":
            raise RuntimeError(f"selftest: raised inside run at batch {batch}")
        if o["fail"] == "refuse":  # what a backend finding the request unsatisfiable does
            raise UserError(f"selftest: refused batch {batch}")
        if o["fail"] == "hang":
            time.sleep(3600)
        if o["fail"] == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)

    def run(self, batch: int) -> None:
        self.batch = batch
        self._misbehave(batch)
        o = self.cfg.options
        if o["touch_mib"]:
            import numpy as np

            np.ones(o["touch_mib"] * 2**17)  # 2**17 float64 = 1 MiB, freed at once
        t = (o["service_ms"] + o["per_sample_ms"] * batch) / 1000
        if o["jitter"]:
            t *= 1 + o["jitter"] * float(self.rng.uniform(-1, 1))
        end = time.perf_counter() + t
        if t > 0.002:
            time.sleep(t - 0.001)
        while time.perf_counter() < end:
            pass

    def timed_region(self) -> dict[str, Any]:
        return region(
            "a sleep of service_ms + per_sample_ms x batch (selftest)",
            host_device_copies=False,
            io_binding=False,
            cuda_graph=False,
            sync="none",
        )

    def runtime(self) -> dict[str, Any]:
        fell_back = self.cfg.options["fail"] == "fallback" and self.cfg.options["fail_batch"] in (
            0,
            self.batch,
        )
        return {
            "device_kind": "elsewhere" if fell_back else self.cfg.device,
            "options": dict(self.cfg.options),
        }


class Selftest(Backend):
    formats = (ONNX,)
    options = (
        Option("service_ms", 1.0, kind=float, help="time per batch"),
        Option("per_sample_ms", 0.0, kind=float, help="extra time per sample"),
        Option("jitter", 0.0, kind=float, help="relative random spread of the service time"),
        Option("fail", "none", ("none", "raise", "refuse", "hang", "segfault", "fallback")),
        Option("fail_batch", 0, kind=int, help="misbehave only at this batch (0: always)"),
        Option("touch_mib", 0, kind=int, help="allocate, fill and free this many MiB per run"),
    )

    def missing(self):
        return None

    def version(self):
        from dlbench.core.version import __version__

        return __version__

    def precisions(self, device):
        return ("fp32",)

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return SelftestRunner(artifact, cfg)


BACKEND = Selftest(
    "selftest",
    "test double: sleeps for a known service time, fails on request",
    "dlbench.harness",
    "dlbench",
    "test",
)
