"""TensorFlow on the CPU with oneDNN (formerly MKL-DNN) and the seed's thread rules.

The seed table's "CPU (MKL optimized)" rows: intra-op threads = physical
cores, inter-op = 1, KMP_BLOCKTIME (the seed used 30 for ResNet-50 at batch
32) and thread affinity, all exported to the cell before TensorFlow loads
and all recorded.  ``--onednn off`` (TF_ENABLE_ONEDNN_OPTS=0) gives the
seed's "CPU (unoptimized)" row on the same machine.  The runner is the
``tensorflow`` backend's, pinned to the CPU; it checks that oneDNN is in the
state asked for, since the variable is read once at import.

TensorFlow's pip wheels run oneDNN on TensorFlow's own thread pool, not
Intel OpenMP, so the KMP_* variables may have no effect there; they are set
and recorded because the seed set them, and a build with Intel OpenMP
honours them.
"""

from __future__ import annotations

import os
from typing import Any

from dlbench.harness.backends.base import (
    ON_OFF,
    ArtifactRef,
    Backend,
    FellBack,
    Option,
    RunConfig,
    Runner,
    region,
)
from dlbench.harness.backends.native import native_formats
from dlbench.harness.backends.tensorflow import TfRunner

SEED_KMP_BLOCKTIME = "30"
SEED_KMP_AFFINITY = "granularity=fine,compact,1,0"


class MklRunner(TfRunner):
    def load(self) -> None:
        self.cfg.options.setdefault("xla", "off")
        super().load()

    def timed_region(self) -> dict[str, Any]:
        base = super().timed_region()
        onednn = self.cfg.options["onednn"] == "on"
        return region(
            base["summary"] + f"; oneDNN {'on' if onednn else 'off'}",
            **{k: v for k, v in base.items() if k not in ("definition", "summary")},
            onednn=onednn,
        )

    def verify(self, runtime: dict[str, Any]) -> None:
        super().verify(runtime)
        want = self.cfg.options["onednn"] == "on"
        if runtime["onednn_enabled"] != want:
            raise FellBack(
                f"asked for oneDNN {'on' if want else 'off'}, TensorFlow reports it "
                f"{'on' if runtime['onednn_enabled'] else 'off'}"
            )


class CpuMkl(Backend):
    framework = "tensorflow"
    formats = native_formats("tensorflow")
    inter_op_pool = True
    options = (
        Option(
            "onednn",
            "on",
            ON_OFF,
            help="TF_ENABLE_ONEDNN_OPTS (off: the seed's unoptimized row)",
            tune_on=("cpu",),
        ),
        Option(
            "kmp_blocktime",
            None,
            kind=str,
            help=f"KMP_BLOCKTIME (default: the environment's, else the seed's {SEED_KMP_BLOCKTIME})",
        ),
        Option(
            "kmp_affinity",
            None,
            kind=str,
            help=f"KMP_AFFINITY (default: the environment's, else {SEED_KMP_AFFINITY})",
        ),
    )

    def availability(self):
        a = super().availability()
        if a.available and os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0":
            a.reason += " (TF_ENABLE_ONEDNN_OPTS=0 in this environment: runs unoptimized)"
        return a

    def precisions(self, device):
        return ("fp32", "bf16")

    def environment(self, options: dict[str, Any], intra_op: int, inter_op: int) -> dict[str, str]:
        return {
            "TF_ENABLE_ONEDNN_OPTS": "1" if options["onednn"] == "on" else "0",
            "KMP_BLOCKTIME": str(
                options["kmp_blocktime"] or os.environ.get("KMP_BLOCKTIME") or SEED_KMP_BLOCKTIME
            ),
            "KMP_AFFINITY": str(
                options["kmp_affinity"] or os.environ.get("KMP_AFFINITY") or SEED_KMP_AFFINITY
            ),
            "TF_NUM_INTRAOP_THREADS": str(intra_op),
            "TF_NUM_INTEROP_THREADS": str(inter_op),
        }

    def runner(self, artifact: ArtifactRef, cfg: RunConfig) -> Runner:
        return MklRunner(artifact, cfg)


BACKEND = CpuMkl(
    "cpu-mkl",
    "TensorFlow with oneDNN on the CPU (intra-op = physical cores, inter-op = 1)",
    "tensorflow",
    "tensorflow",
    "tensorflow",
)
