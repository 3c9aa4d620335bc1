"""The mutation fuzzer (tests/utils/onnx_fuzz.py) in the suite: a fixed seed, a bounded number
of mutants (DLBENCH_FUZZ_MUTANTS for a longer run), every class of mutation at least
twice, through bench, build and verify: no traceback, no hang, no leftover file, every
refusal one line with exit 2."""

from __future__ import annotations

import os

from tests.utils import cli_fuzz, onnx_fuzz


def test_mutated_onnx_files_end_cleanly_in_every_command(tmp_path):
    mutants = int(os.environ.get("DLBENCH_FUZZ_MUTANTS", 2 * len(onnx_fuzz.MUTATIONS)))
    result = onnx_fuzz.fuzz(tmp_path, mutants, seed=0)
    assert result["runs"] == mutants * len(onnx_fuzz.COMMANDS)
    found = [
        f"seed {p['seed']} ({p['kind']}) {p['command']}: {p['why']}\n{p['stderr']}"
        for p in result["problems"]
    ]
    assert not found, "\n\n".join(found)
    # The fuzzer reaches both ends: some mutants are refused, some still run.
    codes = {code for (_, _, code) in result["outcomes"]}
    assert 2 in codes and codes & {0, 1}


def test_hostile_numbers_and_config_files_end_cleanly_in_every_command(tmp_path):
    """Every numeric option of every command (read from the parser) and config files of
    every TOML type, by seed (DLBENCH_FUZZ_CASES for a longer run)."""
    n = int(os.environ.get("DLBENCH_FUZZ_CASES", 800))
    result = cli_fuzz.fuzz(tmp_path, n, seed=0)
    found = [f"{p['case']} {p['argv']}: {p['why']}\n{p['stderr']}" for p in result["problems"]]
    assert not found, "\n\n".join(found)
    assert result["options"] >= 90  # the parser's number options were found, not none
    assert sum(result["outcomes"].values()) == n and result["outcomes"][2] > n // 2


def test_a_name_listed_twice_gets_the_same_refusal_from_bench_build_and_verify(tmp_path):
    """ONNX Runtime runs a graph listing one output twice, and the float16 converter then
    wrote two nodes of that name: bench and verify measured what build refused."""
    model = onnx_fuzz.mlp()
    model.graph.output.add().CopyFrom(model.graph.output[0])
    path = tmp_path / "twice.onnx"
    path.write_bytes(model.SerializeToString())
    endings = {
        name: onnx_fuzz.run_cli([*args(str(path)), "--db", str(tmp_path / "f.sqlite")])
        for name, args in onnx_fuzz.COMMANDS.items()
    }
    for name, (code, stderr) in endings.items():
        assert code == 2 and "lists output 'logits' twice" in stderr, (name, code, stderr)
        assert onnx_fuzz.problem(code, stderr) is None, (name, stderr)


def test_a_third_party_pass_prints_nothing_into_a_refusal(cli, workdir):
    """The FLOP count's fallback (ONNX Runtime's symbolic shape inference) logged "Only
    support models of onnx opset 7 and above." above bench's one refusal line (in a process
    of its own: under pytest, logging goes to pytest's handlers instead)."""
    model = onnx_fuzz.mlp()
    model.opset_import[0].version = 5  # ONNX Runtime implements no Relu-1 (opsets 1-5): one refusal
    (workdir / "old.onnx").write_bytes(model.SerializeToString())
    out = cli(*onnx_fuzz.COMMANDS["bench"]("old.onnx"))
    assert out.returncode == 2 and onnx_fuzz.problem(out.returncode, out.stderr) is None, out.stderr
