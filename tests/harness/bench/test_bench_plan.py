"""The bench request and its plan through the Python API, without running a cell: the
request's rules, the cells it expands to and their identities, and the module split
(request -> plan -> record -> execute) that keeps the old import path working."""

from __future__ import annotations

import ast

import pytest

from dlbench.core.errors import UserError
from dlbench.core.flags import split
from dlbench.harness.bench import execute, plan
from dlbench.harness.bench.measure import StopRule
from dlbench.harness.bench.request import BenchRequest
from tests.utils import ROOT, benchmodels


@pytest.fixture
def mlp(tmp_path):
    return str(benchmodels.mlp(tmp_path / "mlp.onnx"))


def test_split_reads_comma_lists_and_repeats_once_each():
    assert split(["1,8", "32", "8"], int) == [1, 8, 32]
    assert split(None) == []
    with pytest.raises(UserError, match="'x' is not an integer"):
        split(["1,x"], int)


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"artifacts": []}, "no artifact given"),
        ({"batch_sizes": [1, 0]}, "--batch-sizes must be positive integers, got 0"),
        ({"threads": [0]}, "--threads must be at least 1"),
        ({"repeats": 0}, "--repeats must be at least 1"),
        ({"qps": [5.0]}, "--qps and --latency-bound-ms apply to --scenario server"),
        ({"scenarios": ["nightly"]}, "nightly"),
        ({"rule": StopRule(min_duration_s=-1)}, "duration"),
    ],
)
def test_the_request_refuses_before_reading_any_file(changes, needle):
    req = BenchRequest(**{"artifacts": ["/nonexistent/model.onnx"], "backends": ["onnxruntime"], **changes})
    with pytest.raises(UserError, match=needle):
        req.check()
    with pytest.raises(UserError, match=needle):  # the plan checks the request first
        plan.validate(req)


def test_the_request_decides_its_open_defaults_in_one_place():
    req = BenchRequest(artifacts=["m.onnx"], backends=["gpu-maybe"], devices=["gpu", "cpu"])
    assert req.device_names() == ["cuda", "cpu"]
    assert req.inter_op() == 1 and req.precision_names() == ["auto"]
    assert req.thread_counts() and all(t >= 1 for t in req.thread_counts())
    with pytest.raises(UserError, match="--device must be one of cpu, cuda, ascend"):
        BenchRequest(artifacts=["m.onnx"], backends=["x"], devices=["tpu"]).device_names()


def test_the_plan_expands_the_product_and_merges_identical_cells(mlp):
    req = BenchRequest(artifacts=[mlp], backends=["onnxruntime"], batch_sizes=[1, 4], threads=[1, 1, 2])
    cells, _ = plan.validate(req)
    assert sorted((c.batch_size, c.intra_op) for c in cells) == [(1, 1), (1, 2), (4, 1), (4, 2)]
    keys = {plan.identity_key(c, req, "m") for c in cells}
    assert len(keys) == 4
    # another stop rule measures something else: every identity changes
    other = BenchRequest(
        artifacts=[mlp],
        backends=["onnxruntime"],
        batch_sizes=[1, 4],
        threads=[1, 2],
        rule=StopRule(min_duration_s=0.5),
    )
    assert not keys & {plan.identity_key(c, other, "m") for c in plan.validate(other)[0]}
    env = cells[0].environment()
    assert env["OMP_NUM_THREADS"] == str(cells[0].intra_op)


def test_the_payload_is_plain_json_with_full_input_shapes(mlp):
    import json

    req = BenchRequest(artifacts=[mlp], backends=["onnxruntime"], batch_sizes=[4], threads=[1])
    (cell,), _ = plan.validate(req)
    p = execute.payload(cell, req, "/tmp/progress.json")
    assert json.loads(json.dumps(p)) == p
    assert p["run"]["shapes"] == {"x": [4, 64]} and p["batch_size"] == 4


def test_the_payload_is_typed_and_versioned(mlp):
    """What the cell reads back is what the parent built; another version is refused."""
    import pytest

    from dlbench.harness.bench.payload import VERSION, CellPayload, PayloadMismatch

    req = BenchRequest(
        artifacts=[mlp], backends=["onnxruntime"], batch_sizes=[4], threads=[1], shapes={"x": (1, 64)}, seed=7
    )
    (cell,), _ = plan.validate(req)
    message = execute.payload(cell, req, "/tmp/progress.json")
    assert message["version"] == VERSION
    back = CellPayload.from_json(message)
    assert back.to_json() == message
    assert back.run.shapes == {"x": [4, 64]} and back.seed == 7 and back.rule == req.rule
    assert back.signature[0].name == "x" and back.shapes == {"x": (1, 64)}
    with pytest.raises(PayloadMismatch, match="version 0"):
        CellPayload.from_json({**message, "version": 0})


def test_the_training_payload_is_typed_and_versioned():
    """The training cell's message, as the bench cell's: read back whole, or one line."""
    import pytest

    from dlbench.harness.cells.payload import PayloadMismatch
    from dlbench.harness.training.base import TrainConfig
    from dlbench.harness.training.payload import TrainPayload

    sent = TrainPayload(
        TrainConfig("lenet5", "pytorch", 8, 3), "/tmp/stage", packages=True, devices_per_node=2
    )
    message = sent.to_json()
    assert message["version"] == TrainPayload.VERSION and TrainPayload.from_json(message) == sent
    with pytest.raises(PayloadMismatch, match="training cell payload version 0"):
        TrainPayload.from_json({**message, "version": 0})


def _modules():
    for folder in ("core", "models", "converters", "harness"):
        yield from (ROOT / folder).rglob("*.py")


def test_no_module_imports_another_modules_private_names():
    """A name with a leading underscore is its module's own: a helper two modules need is
    made public in one place, not reached into."""
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dlbench"):
                found += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                ]
    assert not found, found


@pytest.mark.parametrize(
    "own,asked,says",
    [
        (
            "int8",
            "fp16",
            "make one first (dlbench build --to fp16; dlbench build --to tensorrt --precision fp16)",
        ),
        ("int8", "bf16", "no dlbench build target makes a bf16 model"),
        ("fp16", "fp32", "bench the fp32 model it was built from"),
    ],
)
def test_a_file_in_its_own_precision_says_how_to_get_the_one_asked(own, asked, says):
    """The advice comes from the build targets' declarations, not a fixed sentence."""
    from dlbench.harness.backends import get_backend
    from dlbench.harness.backends.base import ArtifactRef
    from dlbench.harness.bench.artifacts import Artifact

    art = Artifact(ArtifactRef("/m.onnx", "onnx", "m"), "m.onnx", precision=own)
    with pytest.raises(UserError) as exc:
        plan.cell_precision(art, get_backend("onnxruntime"), "cpu", asked)
    assert f"m.onnx is an {own} model" in str(exc.value) and says in str(exc.value)
