"""``dlbench run model.onnx``: someone holding an ONNX file gets the chain from that hop
on (builds, verification, every backend, the report), with nothing written beside the
file.  Core group: ONNX Runtime only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dlbench.harness.backends import get_backend
from dlbench.harness.store.results import ResultStore
from tests.utils import benchmodels, tiny_onnx
from tests.utils.clitools import assert_usage_error

QUICK = ["--backends", "onnxruntime", "--batch-sizes", "1,2", "--iterations", "3"]


def test_an_onnx_file_runs_the_chain_from_the_builds(cli, workdir):
    source = workdir / "models"
    source.mkdir()
    tiny_onnx.save(tiny_onnx.classifier(), source / "tiny.onnx")
    common = [str(source / "tiny.onnx"), "--precisions", "fp16,int8", *QUICK, "--workdir", "w"]
    steps = cli("run", *common, "--print-steps")
    assert steps.returncode == 0, steps.stderr[-3000:]
    commands = [ln for ln in steps.stdout.splitlines() if ln.startswith("dlbench ")]
    assert [c.split()[1] for c in commands] == ["build", "build", "bench", "report"], commands
    assert all(" --out w/tiny." in c for c in commands[:2]), commands  # into the workdir
    assert commands[2].count("tiny.onnx") == 1, commands[2]  # the file is measured once

    out = cli("run", *common, "-q")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    assert sorted(p.name for p in source.iterdir()) == ["tiny.onnx"]  # nothing beside the file
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "w" / "stages").glob("*")}
    assert stages["build-fp16"]["status"] == "ok" and "export-onnx" not in stages
    recs = ResultStore(workdir / "results.sqlite").records("kind = 'bench'", [])
    measured = {Path(r["context"]["artifact"]["path"]).name for r in recs}
    assert measured >= {"tiny.onnx", "tiny.fp16.onnx"}, measured
    assert all(r["status"] in ("ok", "unstable") for r in recs), [(r["model"], r["error"]) for r in recs]
    # The file and its builds carry one name, so the report groups them as one model.
    builds = ResultStore(workdir / "results.sqlite").records("kind = 'convert'", [])
    assert {r["model"] for r in recs + builds} == {"tiny"}
    # An INT8 build that does not pay (on a model this small, Q/DQ costs more than int8
    # saves) gets the advisor's line in the run's report, as in bench's printout.
    from dlbench.harness.profile.advice import slow_builds

    report = (workdir / "w" / "report.md").read_text()
    slow = slow_builds(recs)
    assert ("## Advice" in report) == bool(slow), report[-2000:]
    for int8, _, gain in slow:
        assert f"tiny INT8 (tiny.int8.onnx) runs at {gain:.2f}x its fp32 file" in report
        assert f"at batch {int8['batch_size']}" in report
    assert stages["bench"].get("advice", []) == [ln[2:] for ln in report.splitlines() if ln.startswith("- ")]


def test_a_refused_cell_leaves_the_bench_stage_measuring_the_rest(cli, workdir):
    """As in 'dlbench bench': one cell its backend refuses is named in the stage's reason,
    and the stage keeps the cells that ran (it failed whole, with none, before)."""
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    knobs = ["-O", "fail=refuse", "-O", "fail_batch=2", "--precisions", "", "--workdir", "w", "-q"]
    out = cli(
        "run", "tiny.onnx", "--backends", "selftest", "--batch-sizes", "1,2", "--iterations", "3", *knobs
    )
    assert out.returncode == 0, out.stderr[-3000:]
    stage = json.loads((workdir / "w" / "stages" / "bench.json").read_text())
    assert stage["status"] == "ok" and stage["reason"].startswith("1 refused ("), stage
    assert "selftest: refused batch 2" in stage["reason"]
    recs = ResultStore(workdir / "results.sqlite").records("kind = 'bench'", [])
    # measured: "unstable" is a measured cell's verdict on a busy machine, not a failure
    assert [(r["batch_size"], r["status"] in ("ok", "unstable")) for r in recs] == [(1, True)]
    assert stage["records"] == [recs[0]["id"]]


def test_a_dynamic_sequence_onnx_file_runs_with_its_shapes(cli, workdir):
    """A transformer export keeps its sequence dynamic: --shape sizes every stage."""
    benchmodels.embedding(workdir / "emb.onnx")
    sizes = [a for n in ("input_ids", "token_type_ids", "attention_mask") for a in ("--shape", f"{n}=1x16")]
    out = cli("run", "emb.onnx", *sizes, "--precisions", "fp16", *QUICK, "--workdir", "w", "-q")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    stages = {p.stem: json.loads(p.read_text()) for p in (workdir / "w" / "stages").glob("*")}
    assert stages["build-fp16"]["status"] == "ok", stages["build-fp16"]


def test_a_named_backend_that_cannot_run_here_is_skipped_and_the_others_measure(cli, workdir):
    """A run names the backends it wants everywhere (a script shared between a GPU and a
    CPU machine); one that cannot run here is said in the stage, not fatal to the rest."""
    trt = get_backend("tensorrt").availability()
    if trt.available:
        pytest.skip("TensorRT runs on this machine")
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    out = cli(
        "run", "tiny.onnx", "--backends", "onnxruntime,tensorrt", "--precisions", "fp16",
        "--batch-sizes", "1", "--iterations", "3", "--workdir", "w", "-q",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    bench = json.loads((workdir / "w" / "stages" / "bench.json").read_text())
    assert bench["status"] == "ok", bench
    assert f"tensorrt skipped: {trt.reason}" in bench["reason"], bench["reason"]
    recs = ResultStore(workdir / "results.sqlite").records("kind = 'bench'", [])
    assert {r["backend"] for r in recs} == {"onnxruntime"} and len(recs) == 2


def test_the_bench_cells_take_the_runs_backend_options(cli, workdir):
    """What tune's best point sets (its config is run's too): the backends' declared
    options and the inter-op threads reach every cell of the bench stage, and its step."""
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    common = ["tiny.onnx", "--precisions", "", "-O", "graph_optimization=basic", "--spin", "off"]
    common += ["--inter-op-threads", "2", *QUICK, "--workdir", "w"]
    steps = cli("run", *common, "--print-steps")
    assert steps.returncode == 0, steps.stderr[-3000:]
    [bench] = [ln for ln in steps.stdout.splitlines() if ln.startswith("dlbench bench ")]
    assert "--inter-op-threads 2" in bench and "-O graph_optimization=basic -O spin=off" in bench, bench
    out = cli("run", *common, "-q")
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    recs = ResultStore(workdir / "results.sqlite").records("kind = 'bench'", [])
    assert len(recs) == 2 and all(r["inter_op_threads"] == 2 for r in recs)
    assert all(
        (r["context"]["options"]["graph_optimization"], r["context"]["options"]["spin"]) == ("basic", "off")
        for r in recs
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--frameworks", "pytorch"], "is an ONNX file"),
        (["--backends", "pytorch", "--graph-optimization", "basic"], "applies to none of the backends"),
        (["-O", "graph_optimization=fastest"], "graph_optimization: 'fastest' is not one of"),
    ],
)
def test_a_file_run_cannot_take_is_one_line(cli, workdir, args, needle):
    tiny_onnx.save(tiny_onnx.classifier(), workdir / "tiny.onnx")
    assert_usage_error(cli("run", "tiny.onnx", *args), needle)
