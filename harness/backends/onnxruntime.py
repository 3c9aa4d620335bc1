"""ONNX Runtime: CPU execution provider; CUDA/TensorRT providers with onnxruntime-gpu."""
from __future__ import annotations

from harness.backends.base import Backend, has_nvidia_gpu
from harness.frameworks import distribution_version


class OnnxRuntime(Backend):
    def missing(self):
        if distribution_version("onnxruntime") or distribution_version("onnxruntime-gpu"):
            return None
        return "onnxruntime is not installed: pip install 'dlbench[onnx]'"

    def devices(self):
        gpu = distribution_version("onnxruntime-gpu") and has_nvidia_gpu()
        return ["cpu", "cuda"] if gpu else ["cpu"]


BACKEND = OnnxRuntime("onnxruntime", "ONNX Runtime (CPU execution provider; CUDA and TensorRT "
                      "providers with onnxruntime-gpu on an NVIDIA GPU)",
                      "onnxruntime", "onnxruntime", "onnx")
