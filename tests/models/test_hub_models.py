"""Models by name (``timm:``, ``torchvision:``, ``hf:``, ``keras:``) through the commands a user
runs on them: built in their cells with random weights (nothing downloaded), sized by the
library's own input size, exported and built with verification, benched; and refused in
one line when the name names nothing.  Core group: the CLI in subprocesses only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.store.results import ResultStore
from dlbench.models.user import hub
from tests.utils.clitools import assert_usage_error

QUICK = ["--batch-sizes", "2", "--iterations", "3", "--warmup", "1"]
# A BERT small enough to export, quantize and bench in seconds; written as its
# config.json alone, as a user's checkout without weights is.
TINY_BERT = {
    "model_type": "bert",
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 500,
    "max_position_embeddings": 64,
}


def _hf_dir(root: Path, config: dict) -> Path:
    d = root / "my-bert"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return d


def test_names_parse_into_sources_that_never_share_a_name(tmp_path):
    timm = hub.parse("timm:resnet18")
    assert (timm.kind, timm.framework, timm.label) == ("hub", "pytorch", "timm:resnet18")
    names = {hub.parse(a).name for a in ("timm:resnet18", "torchvision:resnet18", "keras:ResNet50")}
    assert names == {"timm_resnet18", "torchvision_resnet18", "keras_ResNet50"}
    assert hub.parse("keras:ResNet50").framework == "tensorflow"
    assert hub.parse("nohub:x") is None and hub.parse("resnet50") is None
    d = _hf_dir(tmp_path, TINY_BERT)
    local = hub.parse(f"hf:{d}")
    assert local.path == str(d) and local.name == "hf_my-bert"
    # Code: factories share callable names across files (a.py:build, b.py:build).
    from dlbench.models.user import from_code

    for stem in ("a", "b"):
        (tmp_path / f"{stem}.py").write_text("def build():\n    pass\n")
    code = {from_code(f"{tmp_path / s}.py:build").name for s in ("a", "b")}
    assert code == {"a_build", "b_build"}
    assert from_code("pkg.nets:Net.create").name == "nets_create"
    with pytest.raises(UserError, match="give a model name after 'timm:'"):
        hub.parse("timm:")
    with pytest.raises(UserError, match="holds no config.json"):
        hub.parse(f"hf:{tmp_path}")


def test_hf_config_runs_the_whole_chain(cli, workdir):
    d = _hf_dir(workdir, TINY_BERT)
    out = cli(
        "run",
        f"hf:{d}",
        "--backends",
        "onnxruntime,pytorch",
        "--precisions",
        "int8,fp16",
        *QUICK,
        "--workdir",
        "w",
        "-q",
    )
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "w" / "stages").glob("*")}
    for stage in ("export-pytorch", "build-int8", "build-fp16"):
        assert stages[stage]["status"] == "ok", (stage, stages[stage])
    store = ResultStore(workdir / "results.sqlite")
    convert = store.records("kind = 'convert'", [])
    assert {r["status"] for r in convert} == {"ok"}, [(r["status"], r["error"]) for r in convert]
    # Attention makes the INT8 build dynamic, as ONNX Runtime recommends for transformers.
    [int8] = [r for r in convert if r["precision"] == "int8"]
    recipe = int8["context"]["build_info"]["recipe"]
    assert recipe["mode"] == "dynamic" and "(attention)" in recipe["mode_chosen_by"], recipe
    bench = store.records("kind = 'bench'", [])
    assert {r["model"] for r in bench} == {"hf_my-bert"}
    native = [r for r in bench if r["context"]["artifact"]["format"] != "onnx"]
    assert native and native[0]["context"]["artifact"]["weights"].startswith("random")
    # The sequence is the model's own limit (64 < 128), recorded by the export and reused.
    shapes = {i["shape"][1] for r in bench for i in r["context"]["inputs"] if i["name"] == "input_ids"}
    assert shapes == {64}, shapes
    # Attention's shapes are computed in the graph (Shape -> Gather -> Concat -> Reshape):
    # resolved at the benched shape, every MatMul counts.
    onnx_fp32 = [
        r for r in bench if r["context"]["artifact"]["format"] == "onnx" and r["precision"] == "fp32"
    ]
    flops = onnx_fp32[0]["metrics"]["flops"]
    assert flops["gflops_per_sample"] > 0 and not flops.get("uncounted"), flops

    # The sequence swept like the batch, in one command, as its own table column.
    model = str(workdir / "w" / "hf_my-bert.onnx")
    out = cli("bench", model, "-b", "onnxruntime", "--dim", "sequence=16,32", *QUICK, "--json", "s.json")
    assert out.returncode == 0, out.stderr[-3000:]
    swept = json.loads((workdir / "s.json").read_text())
    by_len = {r["context"]["dims"]["sequence"]: r for r in swept}
    assert sorted(by_len) == [16, 32]
    assert [i["shape"] for i in by_len[16]["context"]["inputs"]] == [[2, 16], [2, 16]]
    assert (
        by_len[32]["metrics"]["flops"]["gflops_per_sample"]
        > by_len[16]["metrics"]["flops"]["gflops_per_sample"]
    )
    header = next(line for line in out.stdout.splitlines() if line.startswith("| Network"))
    assert "| sequence " in header, header
    assert_usage_error(
        cli("bench", model, "-b", "onnxruntime", "--dim", "width=8"), "no input dimension named"
    )
    assert_usage_error(cli("bench", model, "-b", "onnxruntime", "--dim", "sequence=0"), "--dim")


def test_timm_and_torchvision_models_bench_and_export(cli, workdir):
    out = cli(
        "bench", "timm:test_efficientnet", "torchvision:squeezenet1_1", "-b", "pytorch", *QUICK,
        "--json", "b.json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "b.json").read_text())
    assert {r["model"] for r in recs} == {"timm_test_efficientnet", "torchvision_squeezenet1_1"}
    assert all(r["status"] in ("ok", "unstable") for r in recs), [r.get("error") for r in recs]
    # timm's own input size (test_efficientnet: 160) and torchvision's (224), no --shape.
    sizes = {r["model"]: [i["shape"] for i in r["context"]["inputs"]] for r in recs}
    assert sizes == {
        "timm_test_efficientnet": [[2, 3, 160, 160]],
        "torchvision_squeezenet1_1": [[2, 3, 224, 224]],
    }

    exp = cli("export", "timm:test_efficientnet", "--out", "eff.onnx", "-q")
    assert exp.returncode == 0, exp.stderr[-3000:]
    assert (workdir / "eff.onnx").is_file()


@pytest.mark.gpu
def test_models_by_name_bench_on_the_gpu_in_fp32_and_fp16(cli, workdir):
    """The hub builders make their models on the CPU; the PyTorch backend moves them, an
    image model and a token model alike, to the GPU in the precision asked for."""
    d = _hf_dir(workdir, TINY_BERT)
    out = cli(
        "bench", "timm:test_efficientnet", "torchvision:squeezenet1_1", f"hf:{d}", "-b", "pytorch",
        "--device", "cuda", "--precision", "fp32", "--precision", "fp16", *QUICK, "--json", "g.json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    recs = json.loads((workdir / "g.json").read_text())
    cells = {(r["model"], r["precision"]) for r in recs}
    assert cells == {(m, p) for m in ("timm_test_efficientnet", "torchvision_squeezenet1_1", "hf_my-bert")
                     for p in ("fp32", "fp16")}, cells  # fmt: skip
    for r in recs:
        assert r["status"] in ("ok", "unstable"), (r["model"], r["precision"], r.get("error"))
        assert r["device"] == "cuda" and r["context"]["runtime"]["device_kind"] == "cuda", r["model"]
        assert r["metrics"]["device_memory_mb"] > 0


def test_weights_trained_on_a_model_by_name_load_back_into_it(cli, workdir):
    """'dlbench train timm:NAME' saves a state_dict; --weights fills the same name with it
    in every command, and the record says the weights came from that file."""
    out = cli(
        "train", "timm:test_efficientnet", "--objective", "classification", "--steps", "2",
        "--warmup-steps", "0", "--batch-size", "2", "--out", "runs", "--json", "t.json",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    [state] = list((workdir / "runs").rglob("model.pt"))
    out = cli(
        "bench",
        "timm:test_efficientnet",
        "-b",
        "pytorch",
        "--weights",
        str(state),
        *QUICK,
        "--json",
        "b.json",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [r] = json.loads((workdir / "b.json").read_text())
    assert r["context"]["artifact"]["weights"] == f"from {state} (--weights)", r["context"]["artifact"]
    for out_file, extra in (("random.onnx", []), ("trained.onnx", ["--weights", str(state)])):
        exp = cli("export", "timm:test_efficientnet", *extra, "--out", out_file, "-q")
        assert exp.returncode == 0, exp.stderr[-3000:]
    # Trained weights, not the seeded random ones: the two exports differ.
    assert (workdir / "random.onnx").read_bytes() != (workdir / "trained.onnx").read_bytes()
    assert_usage_error(
        cli("export", "random.onnx", "--weights", str(state)),
        "loads into a --model-from model or one model by name",
    )
    both = cli(
        "bench",
        "timm:test_efficientnet",
        "torchvision:squeezenet1_1",
        "-b",
        "pytorch",
        "--weights",
        str(state),
    )
    assert_usage_error(both, "2 models by name")


def test_keras_application_runs_at_its_own_size_and_an_unverifiable_export_skips_onnx(cli, workdir):
    """A random-weight MobileNetV3Small outputs the same scores for every image: its export
    cannot be judged, so nothing builds from it, and the bench still measures the Keras
    model, saying which named backend had nothing to run."""
    out = cli(
        "run", "keras:MobileNetV3Small", "--backends", "onnxruntime,tensorflow", "--precisions", "int8",
        *QUICK, "--workdir", "w", "-q",
    )  # fmt: skip
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "w" / "stages").glob("*")}
    assert stages["export-tensorflow"]["status"] == "unverified", stages["export-tensorflow"]
    assert "cannot judge" in stages["export-tensorflow"]["reason"]
    assert stages["bench"]["status"] == "ok", stages["bench"]
    assert "onnxruntime skipped: no stage made a file it runs" in stages["bench"]["reason"]
    [rec] = ResultStore(workdir / "results.sqlite").records("kind = 'bench'", [])
    assert rec["model"] == "keras_MobileNetV3Small" and rec["backend"] == "tensorflow"
    assert [i["shape"] for i in rec["context"]["inputs"]] == [[2, 224, 224, 3]]
    assert out.returncode == 1  # the builds that could not start are failures of the run


@pytest.mark.parametrize(
    "arg, needle",
    [
        ("timm:resnet18x", "did you mean resnet18"),
        ("torchvision:resnet18x", "has no model 'resnet18x'"),
        ("keras:MobileNetV9", "have no 'MobileNetV9'"),
        ("hf:someone/not-cached", "no local copy"),
    ],
)
def test_names_that_name_nothing_are_refused_in_one_line(cli, workdir, arg, needle):
    framework = "tensorflow" if arg.startswith("keras") else "pytorch"
    out = cli("bench", arg, "-b", framework, env={"HF_HOME": str(workdir / "hf")})
    assert_usage_error(out, arg, needle)


def test_hf_ids_come_from_the_local_cache_and_weights_from_the_directory(cli, workdir):
    """The cache's own layout (models--ORG--NAME/snapshots/REV with refs/main) is what an
    id resolves to offline; a directory saved with its weights is loaded with them."""
    cache = workdir / "hf" / "hub" / "models--someone--tiny-bert"
    (cache / "snapshots" / "abc123").mkdir(parents=True)
    (cache / "refs").mkdir()
    (cache / "refs" / "main").write_text("abc123")
    (cache / "snapshots" / "abc123" / "config.json").write_text(json.dumps(TINY_BERT))
    env = {"HF_HOME": str(workdir / "hf")}
    out = cli("bench", "hf:someone/tiny-bert", "-b", "pytorch", *QUICK, "--json", "c.json", env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "c.json").read_text())
    assert rec["model"] == "hf_tiny-bert" and rec["context"]["artifact"]["weights"].startswith("random")

    saved = workdir / "saved-bert"
    make = (
        "import sys, torch; from dlbench.models.user.torchvision_compat import torchvision_importable; "
        "torchvision_importable(); import transformers as T; torch.manual_seed(1); "
        "T.AutoModel.from_config(T.BertConfig(**__import__('json').loads(sys.argv[1])))"
        ".save_pretrained(sys.argv[2])"
    )
    config = {k: v for k, v in TINY_BERT.items() if k != "model_type"}
    subprocess.run([sys.executable, "-c", make, json.dumps(config), str(saved)], check=True, timeout=300)
    out = cli("bench", f"hf:{saved}", "-b", "pytorch", *QUICK, "--json", "w.json")
    assert out.returncode == 0, out.stderr[-3000:]
    [rec] = json.loads((workdir / "w.json").read_text())
    assert rec["context"]["artifact"]["weights"] == f"from {saved / 'model.safetensors'}"
