"""The mutation fuzzer (tests/onnx_fuzz.py) in the suite: a fixed seed, a bounded number
of mutants (DLBENCH_FUZZ_MUTANTS for a longer run), every class of mutation at least
twice, through bench, build and verify: no traceback, no hang, no leftover file, every
refusal one line with exit 2."""

from __future__ import annotations

import os

import onnx_fuzz


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
