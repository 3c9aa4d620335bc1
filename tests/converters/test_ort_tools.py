"""ONNX Runtime's quantizer and symbolic shape inference load without PyTorch: their
package's ``__init__`` imports torch whenever it is installed (CI installs it), which
every INT8 build and every FLOP count of a symbolic graph used to pay for."""

import subprocess
import sys

CODE = """
import sys
from dlbench.converters.onnx_to_int8 import _quantization
from dlbench.harness.bench import flops
quantization, pre_process = _quantization()
assert flops._symbolic_module() is not None and callable(pre_process)
print("torch" in sys.modules)
"""


def test_the_quantizer_and_symbolic_inference_import_no_torch():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False"], out.stdout
    # and the stand-in says what it is, should anything call it
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dlbench.converters.ort_tools import without_torch; without_torch()\n"
            "from onnxruntime.tools import infer_input_info\n"
            "try:\n    infer_input_info()\nexcept RuntimeError as e:\n    print(e)",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "dlbench's stand-in" in probe.stdout, probe.stderr[-2000:]
