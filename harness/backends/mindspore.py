"""MindSpore itself as an inference backend."""
from harness.backends.native import NativeFramework

BACKEND = NativeFramework("mindspore", "MindSpore native inference", "mindspore", "mindspore", "mindspore")
