"""Options declared on the request fields (``core.flags``): the parser, the request and
the argv a stage prints all come from one declaration, and the input group is one
declared group that bench, build and verify share.  Core group: no framework here."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from dlbench.core import flags
from dlbench.harness.bench.request import BenchRequest
from dlbench.harness.cli import build_parser
from dlbench.harness.commands.bench import request_from
from tests.utils import benchmodels
from tests.utils.clitools import assert_usage_error

LINES = [
    ["m.onnx", "-b", "onnxruntime"],
    [
        "a.onnx",
        "b.onnx",
        "-b",
        "onnxruntime,openvino",
        "--batch-sizes",
        "1,8,32",
        "--threads",
        "1,2",
        "--warmup",
        "3",
        "--min-duration",
        "0.5",
        "--scenario",
        "offline,server",
        "--qps",
        "10,20.5",
        "--shape",
        "x=1x3x8x8",
        "--shapes",
        "y:1x4,'s:0':scalar",
        "--int-range",
        "ids=0:30",
        "--input",
        "sr=16000",
        "--input",
        "flag=true",
        "--allocator",
        "system",
        "--with",
        "numpy==2.0.0",
        "--seed",
        "4",
        "--iqr-threshold",
        "0.2",
        "--timeout",
        "30",
        "--db",
        "r.sqlite",
        "--executor",
        "ray",
        "--ray-resources",
        "node:10.0.0.5",
        "--model-from",
        "m.py:build",
        "--weights",
        "w.pt",
    ],
]


def _request(argv: list[str]) -> BenchRequest:
    args = build_parser().parse_args(["bench", *argv])
    req = request_from(args)
    req.config = req.argv = None  # how it was asked, not what
    return req


@pytest.mark.parametrize("argv", LINES, ids=["bare", "every-kind-of-flag"])
def test_a_requests_argv_makes_the_same_request(argv):
    """What a ``dlbench run`` stage prints is derived from the request it runs: parsing
    that text again must give the very same request (comma lists, repeats, a 0-d shape
    in trtexec's spelling, a switch's absence, nested rule fields)."""
    req = _request(argv)
    again = _request(flags.to_argv(req))
    assert again == req
    if len(argv) > 3:
        assert req.shapes == {"x": (1, 3, 8, 8), "y": (1, 4), "s:0": ()}


def test_help_shows_each_fields_own_default_and_every_group():
    p = build_parser()
    text = p._subparsers._group_actions[0].choices["bench"].format_help()
    assert "(default 1)" in text and "(default tuned)" in text and "(default offline)" in text
    for group in ("measurement:", "inputs (any ONNX model):", "server scenario:", "output:"):
        assert group in text
    for name, fl in flags.declared(BenchRequest):
        assert fl.names[0] in text, name


def test_a_toy_request_gets_its_parser_request_and_argv_from_its_declarations():
    """An extension's request needs nothing but its declarations."""

    @dataclass
    class Toy:
        size: int = flags.flag("--size", default=3, type=int, help="(default {default})")
        names: list[str] = flags.flag("--name", factory=list, many=True, help="repeat")
        loud: bool = flags.flag("--loud", default=False, switch=True, group="style")

    import argparse

    p = argparse.ArgumentParser()
    flags.add_arguments(p, Toy)
    assert "(default 3)" in p.format_help() and "style:" in p.format_help()
    toy = flags.from_args(Toy, p.parse_args(["--name", "a", "--loud", "--name", "b"]))
    assert toy == Toy(size=3, names=["a", "b"], loud=True)
    assert flags.to_argv(toy) == ["--name", "a", "--name", "b", "--loud"]
    assert flags.from_args(Toy, p.parse_args([])) == Toy()


def test_build_and_verify_take_the_input_group(cli, workdir):
    """A token model with a dynamic sequence (every transformer export) builds and verifies
    once its length is given, as bench takes it: the class of 'build has no --shape'."""
    benchmodels.embedding(workdir / "emb.onnx")
    assert_usage_error(cli("build", "emb.onnx", "--to", "fp16"), "--shape")
    sizes = ["--shape", "input_ids=1x16", "--shapes", "token_type_ids:1x16,attention_mask:1x16"]
    ranges = ["--int-range", "attention_mask=1:2"]  # the ids' ranges: the tables' sizes
    out = cli("build", "emb.onnx", "--to", "fp16", *sizes, *ranges, "--json", "b.json")
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads((workdir / "b.json").read_text())
    record = record[0] if isinstance(record, list) else record
    assert record["status"] == "ok" and (workdir / "emb.fp16.onnx").exists()
    out = cli("verify", "emb.onnx", "emb.fp16.onnx", *sizes, *ranges, "--json", "v.json")
    assert out.returncode == 0, out.stderr[-3000:]
    record = json.loads((workdir / "v.json").read_text())
    record = record[0] if isinstance(record, list) else record
    assert record["status"] == "ok"
    # An id range past the table's end is the user's word too: Gather refuses it, one line.
    out = cli("verify", "emb.onnx", "emb.fp16.onnx", *sizes, "--int-range", "input_ids=0:100000")
    assert_usage_error(out, "indices element out of data bounds")
