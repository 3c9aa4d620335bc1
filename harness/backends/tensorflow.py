"""TensorFlow itself as an inference backend."""
from harness.backends.native import NativeFramework

BACKEND = NativeFramework("tensorflow", "TensorFlow native inference", "tensorflow", "tensorflow", "tensorflow")
