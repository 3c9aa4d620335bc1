"""PyTorch itself as an inference backend."""
from harness.backends.native import NativeFramework

BACKEND = NativeFramework("pytorch", "PyTorch native inference", "torch", "torch", "pytorch")
