"""A user's own PyTorch models (issue 18): TorchScript, torch.export and code, saved here by
the test, through bench (native), export (verified), build and the bad inputs, by the CLI."""

import json
import textwrap

import numpy as np
import pytest
import torch

from tests.utils.clitools import assert_usage_error, only_record, write_module

FAST = ("--iterations", "3", "--warmup", "1", "--max-warmup", "3")

CODE = textwrap.dedent("""
    import torch

    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.head = torch.nn.Linear(8, 5)

        def forward(self, image):
            h = torch.relu(self.conv(image)).mean((2, 3))
            return self.head(h)

    def small():
        return Small()

    def broken():
        raise RuntimeError("needs a GPU")
""")


class TwoHeads(torch.nn.Module):
    """Two inputs (an image and a sequence of any length), a dict of two outputs."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.seq = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, image, tokens):
        a = self.conv(image).mean((2, 3))
        b = torch.tanh(self.seq(tokens)).mean(1)
        return {"score": self.head(torch.cat([a, b], 1)), "embed": a + b}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("user_pt")
    mod = write_module(root, "code", CODE)
    torch.manual_seed(3)
    small = mod.small().eval()
    torch.jit.script(small).save(str(root / "small.pt"))
    # Known weights for --weights: every parameter 0.25.
    torch.save({k: torch.full_like(v, 0.25) for k, v in small.state_dict().items()}, str(root / "quarter.pt"))
    two = TwoHeads().eval()
    batch, seq = torch.export.Dim("batch"), torch.export.Dim("seq")
    ep = torch.export.export(
        two,
        (torch.randn(2, 3, 12, 12), torch.randn(2, 5, 4)),
        dynamic_shapes=({0: batch}, {0: batch, 1: seq}),
    )
    torch.export.save(ep, str(root / "two.pt2"))
    (root / "junk.bin").write_bytes(b"not a model at all")
    return root


def test_torchscript_bench_export_and_builds(cli, workdir, saved):
    out = cli(
        "bench",
        str(saved / "small.pt"),
        "-b",
        "pytorch",
        "--shape",
        "image=1x3x16x16",
        "--batch-sizes",
        "1,4",
        *FAST,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "b.json").read_text())
    assert [r["batch_size"] for r in recs] == [1, 4]
    for r in recs:
        assert r["status"] in ("ok", "unstable"), r["error"]
        assert r["model"] == "small" and r["framework"] == "pytorch"
        assert r["context"]["artifact"]["format"] == "pytorch-model"
        assert r["context"]["inputs"][0]["shape"] == [r["batch_size"], 3, 16, 16]
        assert r["context"]["runtime"]["source"]["kind"] == "torchscript"
    assert any("does not record its input shapes" in n for n in recs[0]["context"]["notes"])

    onnx_path = workdir / "small.onnx"
    out = cli(
        "export",
        str(saved / "small.pt"),
        "--shape",
        "image=1x3x16x16",
        "--out",
        str(onnx_path),
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok" and rec["metrics"]["verdict"]["ok"]
    import onnx

    g = onnx.load(str(onnx_path)).graph
    assert [i.name for i in g.input] == ["image"] and [o.name for o in g.output] == ["output"]
    assert g.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"

    for target in ("int8", "fp16"):
        out = cli("build", str(onnx_path), "--to", target, "--json", f"{target}.json")
        assert out.returncode == 0, out.stderr[-3000:]
        assert only_record(workdir, f"{target}.json")["status"] == "ok"


class _Planted:
    """A pickle that runs code: it writes ``marker`` and then yields valid sample inputs, so
    the archive still loads when trusted (the way a real attack would hide)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        code = (
            f"(open({self.marker!r}, 'w').close(), "
            "((__import__('torch').zeros(2, 3, 12, 12), __import__('torch').zeros(2, 5, 4)), {}))[1]"
        )
        return (eval, (code,))


def test_a_pt2_whose_pickles_run_code_needs_trust(cli, workdir, saved):
    """torch.export.load retries a sample-inputs pickle without weights_only when the
    restricted load fails: dlbench checks every pickled member first and refuses the file
    (one line, exit 2, nothing run) unless --trust-model is given; the record says which."""
    import io
    import zipfile

    marker = workdir / "planted"
    evil = workdir / "evil.pt2"
    with zipfile.ZipFile(saved / "two.pt2") as src, zipfile.ZipFile(evil, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if "/data/sample_inputs/" in item.filename:
                buffer = io.BytesIO()
                torch.save(_Planted(str(marker)), buffer)  # the format torch.export.load reads
                data = buffer.getvalue()
            dst.writestr(item, data)
    for command in (["bench", str(evil), "-b", "pytorch", *FAST], ["export", str(evil)]):
        out = cli(*command)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
        assert "can run code when loaded" in out.stderr and "--trust-model" in out.stderr
        assert not marker.exists()
    out = cli("bench", str(evil), "-b", "pytorch", "--trust-model", *FAST, "--json", "t.json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert marker.exists() and only_record(workdir, "t.json")["context"]["model_trust_granted"] is True


def test_export_program_with_two_inputs_two_outputs_and_a_dynamic_sequence(cli, workdir, saved):
    # No --shape: the sequence takes the length of the program's example inputs (5).
    out = cli(
        "bench", str(saved / "two.pt2"), "-b", "pytorch", "--batch-sizes", "3", *FAST, "--json", "b.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable"), r["error"]
    assert r["context"]["model_trust_granted"] is False  # a plain archive needs no trust
    assert [i["shape"] for i in r["context"]["inputs"]] == [[3, 3, 12, 12], [3, 5, 4]]
    assert any("example inputs" in n for n in r["context"]["notes"])

    out = cli(
        "export",
        str(saved / "two.pt2"),
        "--shape",
        "tokens=1x9x4",
        "--out",
        str(workdir / "two.onnx"),
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    rec = only_record(workdir, "e.json")
    assert rec["status"] == "ok"
    assert set(rec["metrics"]["verdict"]["outputs"]) == {"score", "embed"}
    import onnx

    g = onnx.load(str(workdir / "two.onnx")).graph
    assert [i.name for i in g.input] == ["image", "tokens"]
    assert [o.name for o in g.output] == ["score", "embed"]
    seq = g.input[1].type.tensor_type.shape.dim[1]
    assert seq.dim_param and not seq.HasField("dim_value")  # any length, as the model
    # ... and the file runs at a length the export never saw.
    import onnxruntime as ort

    sess = ort.InferenceSession(str(workdir / "two.onnx"))
    score, _ = sess.run(
        None, {"image": np.ones((2, 3, 12, 12), np.float32), "tokens": np.ones((2, 13, 4), np.float32)}
    )
    assert score.shape == (2, 3)


def test_model_from_code_with_weights(cli, workdir, saved):
    code = f"{saved / 'code.py'}:small"
    out = cli(
        "bench", "--model-from", code, "-b", "pytorch", "--shape", "image=1x3x8x8", *FAST, "--json", "b.json"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = only_record(workdir, "b.json")
    assert r["status"] in ("ok", "unstable") and r["model"] == "code_small"
    said = [n for n in r["context"]["notes"] if "runs your code" in n]
    assert out.stderr.count("runs your code") == 1 and said

    out = cli(
        "export",
        "--model-from",
        code,
        "--weights",
        str(saved / "quarter.pt"),
        "--shape",
        "image=1x3x8x8",
        "--out",
        str(workdir / "q.onnx"),
        "--json",
        "e.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert only_record(workdir, "e.json")["status"] == "ok"
    import onnx
    from onnx import numpy_helper

    weights = [numpy_helper.to_array(t) for t in onnx.load(str(workdir / "q.onnx")).graph.initializer]
    assert weights and all(np.allclose(w, 0.25) for w in weights if w.size > 1)


def test_bad_user_models_are_one_line(cli, workdir, saved):
    assert_usage_error(cli("bench", str(saved / "quarter.pt"), "-b", "pytorch"), "torch.save pickle")
    assert_usage_error(cli("bench", str(saved / "junk.bin"), "-b", "pytorch"), "no format dlbench knows")
    assert_usage_error(
        cli("bench", str(saved / "small.pt"), "-b", "pytorch"),
        "does not record its input shapes",
        "--shape image=",
    )
    assert_usage_error(
        cli("bench", "--model-from", "no_such_module_here:net", "-b", "pytorch"),
        "cannot import no_such_module_here",
        "ModuleNotFoundError",
    )
    assert_usage_error(
        cli("export", "--model-from", f"{saved / 'code.py'}:broken"), "calling broken() failed", "needs a GPU"
    )
    assert_usage_error(cli("bench", "--model-from", "nocolon", "-b", "pytorch"), "MODULE:CALLABLE")
    assert not list(workdir.glob("*.onnx"))
    # A checkpoint that needs the unrestricted unpickler: dlbench's line, not torch's advice
    # to load it unsafely; the same refusal on every command that takes --weights.
    torch.save({"w": torch.ones(1), "when": __import__("datetime").date(2026, 1, 1)}, workdir / "odd.pt")
    code = f"{saved / 'code.py'}:small"
    for command in (["bench", "-b", "pytorch"], ["export"]):
        args = [*command, "--model-from", code, "--weights", str(workdir / "odd.pt")]
        args += ["--shape", "image=1x3x8x8"]
        assert_usage_error(cli(*args), "datetime.date (not a tensor or container)", "--trust-model")


def test_run_on_a_users_model_exports_builds_and_benches_without_training(cli, workdir, saved):
    common = (
        str(saved / "small.pt"),
        "--shape",
        "image=1x3x16x16",
        "--precisions",
        "fp16",
        "--backends",
        "onnxruntime,pytorch",
        "--batch-sizes",
        "2",
        "--iterations",
        "3",
        "--workdir",
        str(workdir / "run"),
    )
    steps = cli("run", *common, "--print-steps")
    assert steps.returncode == 0, steps.stderr[-3000:]
    assert "dlbench train" not in steps.stdout
    assert f"dlbench export {saved / 'small.pt'} --out {workdir / 'run' / 'small.onnx'}" in steps.stdout
    out = cli("run", *common, "-q")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "run" / "stages").glob("*")}
    assert stages["export-pytorch"]["status"] == "ok"
    assert stages["build-fp16"]["status"] == "ok"
    assert "train-pytorch" not in stages
    import sqlite3

    con = sqlite3.connect(workdir / "results.sqlite")
    formats = {
        json.loads(c)["artifact"]["format"]
        for (c,) in con.execute("SELECT context FROM records WHERE kind = 'bench'")
    }
    assert formats == {"onnx", "pytorch-model"}
