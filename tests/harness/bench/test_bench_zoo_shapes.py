"""A zoo model's ONNX file benchmarks without --shape; throughput units follow the task.

Core group: ONNX files are written with the ``onnx`` package, no framework.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from dlbench.converters import onnx_io
from dlbench.core.frameworks import FRAMEWORKS
from dlbench.harness.bench import inputs as inputs_mod
from dlbench.harness.bench.artifacts import resolve
from dlbench.harness.output.tables import train_headers, train_rows


def _token_model(path, names, model=None):
    """ids -> float sum per row: every input (batch, "seq") int32, nothing fixed but rank."""
    ins = [helper.make_tensor_value_info(n, TensorProto.INT32, ["batch", "seq"]) for n in names]
    nodes, total = [], None
    for n in names:
        nodes.append(helper.make_node("Cast", [n], [f"{n}_f"], to=TensorProto.FLOAT))
        if total is None:
            total = f"{n}_f"
        else:
            nodes.append(helper.make_node("Add", [total, f"{n}_f"], [f"sum_{n}"]))
            total = f"sum_{n}"
    nodes.append(helper.make_node("ReduceSum", [total], ["logits"], keepdims=1))
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    m = helper.make_model(
        helper.make_graph(nodes, "g", ins, [out]), opset_imports=[helper.make_opsetid("", 11)]
    )
    if model:
        onnx_io.set_metadata(m, {"model": model, "framework": "pytorch"})
    onnx.save(m, str(path))
    return path


BERT = ("input_ids", "token_type_ids", "attention_mask")


def test_metadata_names_the_zoo_model_and_sizes_the_sequence(tmp_path):
    art = resolve(str(_token_model(tmp_path / "exported.onnx", BERT, "bert-tiny")))
    assert art.ref.model == "bert-tiny"  # read from dlbench.model, not the stem
    assert art.ref.framework == "pytorch"
    assert art.default_shapes == {n: (1, 64) for n in BERT}
    assert "bert-tiny" in art.default_shapes_note
    p = inputs_mod.plan(art.signature, 4, art.default_shapes, {}, art.graph_ranges)
    assert [i.shape for i in p.inputs] == [(4, 64)] * 3


def test_one_input_token_model_gets_its_spec_length(tmp_path):
    art = resolve(str(_token_model(tmp_path / "m.onnx", ("input",), "lstm-tiny")))
    from dlbench.models.registry import get_model

    assert art.default_shapes == {"input": (1, *get_model("lstm-tiny").inputs[0].shape)}


def test_a_foreign_file_still_needs_its_shape(tmp_path):
    art = resolve(str(_token_model(tmp_path / "foreign.onnx", BERT)))
    assert art.ref.model == "foreign" and art.default_shapes == {}
    with pytest.raises(Exception, match="--shape"):
        inputs_mod.plan(art.signature, 1, art.default_shapes, {}, art.graph_ranges)


@pytest.mark.parametrize(
    "model,unit",
    [("bert-tiny", "sentences/sec"), ("lstm-tiny", "sentences/sec"), ("resnet50-mini", "images/sec")],
)
def test_train_table_unit_follows_the_model(model, unit):
    assert f"Throughput ({unit})" in train_headers([{"model": model}])


def test_mixed_train_table_says_samples():
    assert "Throughput (samples/sec)" in train_headers([{"model": "bert-tiny"}, {"model": "resnet50-mini"}])


def test_an_eager_run_is_marked_only_where_the_framework_compiles_its_steps():
    """--eager in a record's config: TensorFlow's and MindSpore's steps are not their compiled
    graphs' and the row says so; PyTorch's steps are the same either way and are not marked."""

    def row(framework, eager):
        record = {
            "framework": framework,
            "framework_version": "9.9",
            "model": "resnet50-mini",
            "status": "failed",
            "error": "x",
            "precision": "fp32",
            "batch_size": 4,
            "context": {"config": {"eager": True} if eager else {}},
        }
        return train_rows([record])[0][1]

    for name, fw in FRAMEWORKS.items():
        assert row(name, eager=False) == f"{fw.display} 9.9"
        assert row(name, eager=True) == f"{fw.display} 9.9" + (" (eager)" if fw.compiles_steps else "")
    assert [n for n, fw in FRAMEWORKS.items() if not fw.compiles_steps] == ["pytorch"]
