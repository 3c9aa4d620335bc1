"""NVIDIA TensorRT engines: needs the tensorrt package, cuda-python and an NVIDIA GPU."""
from __future__ import annotations

from harness.backends.base import Backend, has_nvidia_gpu
from harness.frameworks import is_installed


class TensorRT(Backend):
    def missing(self):
        why = super().missing()
        if why is None and not is_installed("cuda"):
            return "cuda-python is not installed: pip install 'dlbench[tensorrt]'"
        return why

    def devices(self):
        return ["cuda"] if has_nvidia_gpu() else []

    def no_device_reason(self):
        return "no NVIDIA GPU on this machine (nvidia-smi found none)"


BACKEND = TensorRT("tensorrt", "TensorRT engines (fp32/fp16/int8) on an NVIDIA GPU",
                   "tensorrt", "tensorrt", "tensorrt")
