"""Every number validated, once, where its option is declared (``core.flags.number``): the
command line and a config file get the same one-line refusal, and input shapes that would
measure nothing or allocate without bound are refused the same way by bench, build and
verify, before anything is allocated."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from dlbench.core.errors import UserError
from dlbench.core.flags import INT_LIMIT, NumberError, number, split
from tests.utils.clitools import assert_usage_error


def test_number_refuses_what_is_not_a_finite_number_in_range():
    whole, seconds = number(int, low=1), number(float, low=0)
    assert whole("8") == 8 and seconds("0.5") == 0.5
    for bad, why in (
        ("nan", "not an integer"),
        ("0", "below 1"),
        (str(INT_LIMIT + 1), "above 2,147,483,647"),
        ("1e3", "not an integer"),
        (True, "not a number"),
    ):
        with pytest.raises(NumberError, match=why):
            whole(bad)
    for bad in ("nan", "inf", "-inf"):
        with pytest.raises(NumberError, match="not a finite number"):
            seconds(bad)
    with pytest.raises(UserError, match="above"):
        split(["1,99999999999999999999"], int)  # comma lists check each part


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--min-duration", "nan"], "'nan' is not a finite number"),
        (["--min-duration", "inf"], "'inf' is not a finite number"),
        (["--batch-sizes", "99999999999999999999"], "is above 2,147,483,647"),
        (["--iterations", "1e9999"], "is not an integer"),
        (["--seed", "-99999999999999999999"], "is below"),
        # argparse drops a '--' value without calling the type: the option got [] (cli_fuzz)
        (["--timeout=--"], "argument --timeout: expected a value, got '--'"),
    ],
)
def test_cli_numbers(cli, workdir, args, needle):
    assert_usage_error(cli("bench", "lenet5", "-b", "onnxruntime", *args, "--db", "x.sqlite"), needle)
    assert not (workdir / "x.sqlite").exists()


def test_config_numbers_and_encoding(cli, workdir):
    (workdir / "nan.toml").write_text("min-duration = nan\n")
    out = cli("bench", "lenet5", "-b", "onnxruntime", "--config", "nan.toml")
    assert_usage_error(out, "key 'min-duration'", "'nan' is not a finite number")
    (workdir / "latin1.toml").write_bytes('model = "caf\xe9"\n'.encode("latin-1"))
    out = cli("bench", "lenet5", "-b", "onnxruntime", "--config", "latin1.toml")
    assert_usage_error(out, "not UTF-8 text")


def _relu(path, dims):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


@pytest.mark.parametrize(
    "dims,needle",
    [
        ([0, 4], "declares a batch of 0"),
        (["N", 2**32], "GiB cap (DLBENCH_MAX_INPUT_GB raises it)"),
    ],
)
def test_inputs_that_measure_nothing_or_cannot_fit_are_refused_alike(cli, workdir, dims, needle):
    """Refused before allocating: a 2**32-wide input would ask numpy for 16 GiB a sample."""
    model = _relu(workdir / "odd.onnx", dims)
    for args in (
        ["bench", model, "-b", "onnxruntime", "--iterations", "2"],
        ["build", model, "--to", "fp16"],
        ["verify", model, model],
    ):
        assert_usage_error(cli(*args), needle)
    assert sorted(p.name for p in workdir.iterdir() if p.suffix == ".onnx") == ["odd.onnx"]
    assert np.prod([d for d in dims if isinstance(d, int)]) >= 0
