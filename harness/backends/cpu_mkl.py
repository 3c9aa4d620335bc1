"""TensorFlow on the CPU with oneDNN (formerly MKL-DNN) and the seed's thread rules."""
from __future__ import annotations

import os

from harness.backends.base import Backend


class CpuMkl(Backend):
    def availability(self):
        a = super().availability()
        if a.available and os.environ.get("TF_ENABLE_ONEDNN_OPTS") == "0":
            a.reason += " (TF_ENABLE_ONEDNN_OPTS=0 in this environment: runs unoptimized)"
        return a


BACKEND = CpuMkl("cpu-mkl", "TensorFlow with oneDNN on the CPU (intra-op = physical cores, "
                 "inter-op = 1)", "tensorflow", "tensorflow", "tensorflow")
