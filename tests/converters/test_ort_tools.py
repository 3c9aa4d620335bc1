"""ONNX Runtime's quantizer and symbolic shape inference load without PyTorch: their
package's ``__init__`` imports torch whenever it is installed (CI installs it), which
every INT8 build and every FLOP count of a symbolic graph used to pay for."""

import json
import subprocess
import sys

from tests.utils import benchmodels

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


def test_what_the_quantizer_logs_goes_into_the_record_not_onto_stderr(cli, workdir):
    """ONNX Runtime's quantizer logs a line per tensor through the root logger (a rank-1
    LayerNorm scale it cannot quantize per channel): 289 lines for one generated synth
    network.  The build keeps them, counted by message, in its record."""
    benchmodels.layer_norm(workdir / "ln.onnx")
    out = cli("build", "ln.onnx", "--to", "int8", "--static", "--json", "b.json")
    [record] = json.loads((workdir / "b.json").read_text())
    assert record["status"] in ("ok", "unverified"), (record["status"], record["error"])
    # One note says that the quantizer spoke and where its words went, not a line each.
    notes = [line for line in out.stderr.splitlines() if "quantizer logged" in line]
    assert notes == [
        "dlbench build: note: ONNX Runtime's quantizer logged 1 message (one kind, the most frequent: "
        "Axis 1 is out-of-range for weight 'gamma' with rank 1); all of them are in the record's "
        "build_info.quantizer_log"
    ], out.stderr[-2000:]
    assert out.stderr.count("out-of-range") == 1, out.stderr[-2000:]
    log = record["context"]["build_info"]["quantizer_log"]
    said = log["Axis 1 is out-of-range for weight '...' with rank 1"]
    assert said == {"count": 1, "example": "Axis 1 is out-of-range for weight 'gamma' with rank 1"}, log
    # A build with nothing to say says so with an empty log, not a missing key.
    benchmodels.mlp(workdir / "mlp.onnx")
    quiet = cli("build", "mlp.onnx", "--to", "int8", "--static", "--json", "m.json")
    assert quiet.returncode == 0 and "quantizer logged" not in quiet.stderr, quiet.stderr[-2000:]
    [plain] = json.loads((workdir / "m.json").read_text())
    assert plain["context"]["build_info"]["quantizer_log"] == {}
