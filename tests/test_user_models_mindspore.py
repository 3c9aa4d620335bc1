"""A user's own MindSpore models (issue 18): a MindIR graph without any sidecar (its inputs read
from the file), and an nn.Cell built by --model-from code, through bench and export."""

import json
import textwrap

import numpy as np
import pytest

from tests.utils.clitools import assert_usage_error, only_record

FAST = ("--iterations", "3", "--warmup", "1", "--max-warmup", "3")

CODE = textwrap.dedent("""
    from mindspore import nn, ops

    class Pair(nn.Cell):
        def __init__(self):
            super().__init__()
            self.dense = nn.Dense(6, 3)
            self.conv = nn.Conv2d(3, 4, 3)

        def construct(self, feats, img):
            return self.dense(feats), ops.mean(self.conv(img), (2, 3))

    def pair():
        return Pair()
""")


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    import importlib.util
    import sys

    import mindspore as ms

    root = tmp_path_factory.mktemp("user_ms")
    (root / "pair_net.py").write_text(CODE)
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("pair_net", root / "pair_net.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["pair_net"] = mod
    spec.loader.exec_module(mod)
    net = mod.pair()
    net.set_train(False)
    ms.export(
        net,
        ms.Tensor(np.zeros((2, 6), np.float32)),
        ms.Tensor(np.zeros((2, 3, 8, 8), np.float32)),
        file_name=str(root / "pair"),
        file_format="MINDIR",
    )
    return root


def test_mindir_without_sidecar_reads_its_own_inputs(cli, workdir, saved):
    assert not list(saved.glob("*.json"))
    out = cli("bench", str(saved / "pair.mindir"), "-b", "mindspore", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    # Exported at batch 2, so fixed at 2: the names and shapes come from the graph itself.
    assert [(i["name"], i["shape"]) for i in r["context"]["inputs"]] == [
        ("feats", [2, 6]),
        ("img", [2, 3, 8, 8]),
    ]
    assert r["batch_size"] == 2
    assert_usage_error(cli("export", str(saved / "pair.mindir")), "not from a MindIR graph")


def test_cell_from_code_benches_and_exports_verified(cli, workdir, saved):
    code = f"{saved / 'pair_net.py'}:pair"
    shapes = ("--shape", "feats=1x6", "--shape", "img=1x3x8x8")
    out = cli(
        "bench",
        "--model-from",
        code,
        "-b",
        "mindspore",
        *shapes,
        "--batch-sizes",
        "3",
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    assert r["framework"] == "mindspore" and r["model"] == "pair_net_pair"
    out = cli(
        "export", "--model-from", code, *shapes, "--out", str(workdir / "pair.onnx"), "--json", "e.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok" and set(rec["metrics"]["verdict"]["outputs"]) == {"output_0", "output_1"}
    import onnx

    g = onnx.load(str(workdir / "pair.onnx")).graph
    assert [i.name for i in g.input] == ["feats", "img"]
    assert all(i.type.tensor_type.shape.dim[0].dim_param == "batch" for i in g.input)
    assert json.loads(json.dumps(rec["context"]["source"]["user"]))["model_from"] == code


def test_train_a_cell_from_code_on_either_output(cli, workdir, saved):
    train = (
        "--model-from",
        f"{saved / 'pair_net.py'}:pair",
        "--shape",
        "feats=1x6",
        "--shape",
        "img=1x3x8x8",
        "--steps",
        "6",
        "--warmup-steps",
        "1",
        "--batch-size",
        "8",
        "--lr",
        "0.05",
    )
    out = cli("train", *train, "--objective", "classification", "--eval", "--json", "c.json")
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "c.json")
    assert r["status"] == "ok", r["error"]
    assert r["framework"] == "mindspore" and r["context"]["identity"]["loss_output"] == "output_0"
    losses = r["metrics"]["losses"]
    assert all(np.isfinite(losses)) and min(losses[-3:]) < losses[0], losses
    weights = workdir / "runs" / "pair_net_pair" / "mindspore" / "model.ckpt"
    out = cli("train", *train, "--objective", "regression", "--loss-output", "output_1", "--json", "r.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "r.json")["context"]["user_model"]["label_shape"] == [4]
    # The checkpoint carries the Cell's own parameter names: it loads back as --weights.
    out = cli("bench", *train[:6], "--weights", str(weights), "-b", "mindspore", *FAST, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert_usage_error(
        cli("train", str(saved / "pair.mindir"), "--objective", "regression"), "MindIR", "cannot train"
    )
