"""The synthetic benchmark: its fits on known answers, its network as ONNX Runtime runs it,
and profile -> generate -> validate end to end on two small applications."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlbench.harness.convert.builds import distinct_stems
from dlbench.harness.stats import percentile
from dlbench.harness.store.results import ResultStore
from dlbench.harness.synth import emit, fit, rounds
from dlbench.harness.synth.baselines import MICRO, REPLAY, cells, replays
from dlbench.harness.synth.counts import divergence
from dlbench.harness.synth.groups import response, score_ratios, split, subset, tilted
from dlbench.harness.synth.matrix import Matrix, build_all, failure_line, measure
from dlbench.harness.synth.playoff import SCORE_MOVED_LIMIT, moved_line, score_moved
from dlbench.harness.synth.runs import without_profiler
from dlbench.harness.synth.tables import validation_table
from dlbench.harness.synth.units import Unit, batch_axis, unit_of
from dlbench.harness.synth.validate import judge, scores, spearman, validate
from dlbench.harness.synth.workload import Reference, at_timed
from tests.utils.clitools import run_cli

OPSET = 17
RATIO_WEIGHT = 2.5  # generate's --ratio-weight in the end-to-end fixture (default 1)


def _w(name: str, shape, seed: int = 0):
    fan_in = math.prod(shape[1:]) or 1
    data = np.random.default_rng(seed).uniform(-1, 1, shape) / math.sqrt(fan_in)
    return numpy_helper.from_array(data.astype(np.float32), name)


def _save(nodes, inputs, outputs, inits, path):
    model = helper.make_model(
        helper.make_graph(nodes, path.stem, inputs, outputs, inits),
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def cnn(path, width: int = 32, side: int = 32):
    """Conv+ReLU stages (3x3 and 1x1, strided between stages), global pooling, a
    classifier: an image workload."""
    nodes, inits, prev, c = [], [], "x", 3
    layers = [
        (width, 3, 1),
        (width, 3, 1),
        (2 * width, 3, 2),
        (width, 1, 1),
        (2 * width, 3, 1),
        (4 * width, 3, 2),
    ]
    for i, (cout, k, stride) in enumerate(layers):
        inits += [
            _w(f"w{i}", (cout, c, k, k), i),
            numpy_helper.from_array(np.zeros(cout, np.float32), f"b{i}"),
        ]
        pads = [k // 2] * 4
        nodes += [
            helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=pads, strides=[stride] * 2),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
        ]
        prev, c = f"r{i}", cout
    inits.append(_w("fc", (c, 10)))
    nodes += [
        helper.make_node("GlobalAveragePool", [prev], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, side, side])
    return _save(nodes, [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits, path)


def attention(path, seq: int = 128, hidden: int = 256):
    """Projection, scores, softmax, context, layer norm, a head: a transformer-like workload."""
    inits = [_w("wq", (hidden, hidden), 1), _w("wk", (hidden, seq), 2), _w("wv", (seq, hidden), 3)]
    inits += [numpy_helper.from_array(np.ones(hidden, np.float32), "g")]
    inits += [numpy_helper.from_array(np.zeros(hidden, np.float32), "b")]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["q", "wk"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "wv"], ["ctx"]),
        helper.make_node("LayerNormalization", ["ctx", "g", "b"], ["n"], axis=-1),
        helper.make_node("MatMul", ["n", "head"], ["y"]),  # a small output: its copy costs little
    ]
    inits.append(_w("head", (hidden, 4), 4))
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", seq, hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", seq, 4])
    return _save(nodes, [x], [y], inits, path)


# -- the fits on known answers ---------------------------------------------------------


def test_a_refit_prices_a_unit_over_every_network_it_ran_in():
    """Pooled by instances: one in a network where it cost 10 µs, three where it cost 20
    (4 of them in another class there, which counts as 3 over the four)."""
    from dlbench.harness.synth.counts import pooled

    classes, own = pooled([(1, {"conv": 10.0}, 10.0), (3, {"conv": 20.0, "layout": 4.0}, 20.0)])
    assert classes == pytest.approx({"conv": 17.5, "layout": 3.0}) and own == pytest.approx(17.5)


def test_nnls_meets_its_optimality_conditions():
    rng = np.random.default_rng(0)
    a = rng.uniform(0, 1, (12, 5))
    b = a @ np.array([2.0, 0.0, 1.0, 0.0, 3.0]) + rng.normal(0, 0.01, 12)
    b[0] -= 3  # a residual that pushes some coefficients against zero
    x = fit.nnls(a, b)
    gradient = a.T @ (b - a @ x)
    assert (x >= 0).all()
    assert np.allclose(gradient[x > 1e-9], 0, atol=1e-8)  # stationary where free
    assert (gradient[x <= 1e-9] <= 1e-8).all()  # no gain from raising a zero one
    exact = np.array([1.0, 2.0, 0.5])
    square = rng.uniform(0.1, 1, (3, 3))
    assert np.allclose(fit.nnls(square, square @ exact), exact, atol=1e-8)


def test_integer_counts_never_worse_than_rounding():
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, (8, 4))
    b = a @ np.array([3.4, 0.6, 7.5, 1.2])
    x = fit.nnls(a, b)
    counts = fit.integer_counts(a, b, x)
    assert counts.dtype.kind == "i" and (counts >= 0).all()
    rounded = np.rint(x)
    assert np.sum((a @ counts - b) ** 2) <= np.sum((a @ rounded - b) ** 2) + 1e-12


def test_integer_counts_judge_every_step_s_candidates_in_one_call():
    """The generator's error is numpy over all candidates at once: called once per
    candidate, a fit of thousands of instances took many minutes of the parent's CPU."""
    target = np.array([5, 0, 12])
    calls = []

    def errors(n):
        calls.append(len(n))
        return np.abs(n - target).sum(axis=1).astype(float)

    a, b = np.eye(3), np.zeros(3)
    counts = fit.integer_counts(a, b, np.array([2.2, 1.4, 9.6]), errors=errors)
    assert counts.tolist() == target.tolist()
    # One call for the start, one per step (unit 0 up three times, unit 1 down, unit 2
    # up twice: equal gains go to the lowest unit), one that finds none; from a zero
    # count no step down is a candidate.
    assert calls == [1, 6, 6, 6, 6, 5, 5, 5]


def test_kmedoids_picks_real_points_one_per_blob_and_keeps_keys_apart():
    rng = np.random.default_rng(2)
    blobs = [rng.normal(centre, 0.1, (6, 2)) for centre in ((0, 0), (5, 5))]
    points = np.vstack([*blobs, [[0.05, 0.0]]])
    keys = ["conv"] * 12 + ["depthwise"]  # the last sits in blob 0, but is another kernel
    weights = np.ones(len(points))
    medoids, labels = fit.kmedoids(points, weights, keys, 3)
    assert sorted(labels[:6].tolist()) == [labels[0]] * 6 and sorted(labels[6:12].tolist()) == [labels[6]] * 6
    assert len({labels[0], labels[6], labels[12]}) == 3
    assert medoids[labels[12]] == 12  # its own cluster: never merged across keys
    assert all(0 <= m < len(points) for m in medoids)


def test_rank_correlation_and_judgement_on_hand_counted_cases():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    actual = {"a": 1.0, "b": 2.0, "c": 2.01, "d": 4.0}
    predicted = {"a": 1.0, "b": 2.2, "c": 1.9, "d": 4.0}
    j = judge(list(actual), actual, predicted, floor=0.02)
    # b-c differ by 0.5 %: within the floor, not counted; the other five pairs agree.
    assert j["pairs_beyond_noise"] == 5 and j["pairwise_agreement"] == 1.0
    assert j["median_error"] == pytest.approx((0 + (1 - 1.9 / 2.01)) / 2)  # of 0, 0, 0.055, 0.1
    # p90 interpolated as every dlbench p90: 0.7 of the way from the third error to the fourth.
    third = 1 - 1.9 / 2.01
    assert j["p90_error"] == pytest.approx(third + 0.7 * (0.1 - third))


def test_micro_cells_are_the_heaviest_real_shapes_by_flop_split_and_replays_every_layer():
    conv = Unit("Conv", "convolution", (16, 8, 8), (16, 8, 8), 0, 0, {"kernel_shape": [3, 3]})
    small = Unit("Conv", "convolution", (4, 8, 8), (4, 8, 8), 0, 0, {"kernel_shape": [1, 1]})
    gemm = Unit("MatMul", "matmul / gemm", (8, 64), (8, 64), 0, 0, {})
    relu = Unit("Relu", "activation", (16, 8, 8), (16, 8, 8), 0, 0, {})

    def node(app, unit):
        return {"app": app, "unit": unit.to_json()}

    workload = {
        "applications": [{"weight": 1.0}, {"weight": 3.0}],
        # app 0: all conv (the 3x3 twice, the 1x1 once); app 1: all GEMM.  An activation
        # and a node with no unit are no micro kind.
        "nodes": [node(0, conv), node(0, conv), node(0, small), node(0, relu), {"app": 0, "unit": None}]
        + [node(1, gemm)],
    }
    got = {kind: (unit, weight) for kind, unit, weight in cells(workload)}
    # Each application's split counts by its weight, not by how many FLOPs it does.
    assert got["conv"][1] == pytest.approx(0.25) and got["gemm"][1] == pytest.approx(0.75)
    assert got["conv"][0] == conv and got["gemm"][0] == gemm
    # The replays: every node with a unit, each unit as often as the application has it.
    assert [dict(lanes) for lanes in replays(workload)] == [{conv: 2, small: 1, relu: 1}, {gemm: 1}]


def test_a_generated_networks_int8_mode_is_the_one_most_of_its_applications_weight_takes():
    """Not the network's own graph's choice: one recurrent unit among its convolutions
    would quantize it dynamically while most of the set it stands for is static CNNs."""
    from dlbench.harness.synth.workload import set_mode

    cnn, rnn = {"weight": 1.0, "int8_dynamic": False}, {"weight": 1.0, "int8_dynamic": True}
    assert set_mode([cnn, cnn, rnn]) is False
    assert set_mode([cnn, {**rnn, "weight": 3.0}]) is True
    assert set_mode([cnn, rnn]) is False  # a tie: static, what the CNNs' builds are


def test_a_weighted_predictor_and_baselines_that_missed_configurations():
    """The micro cells count by their weights; a baseline that missed some configurations
    is judged on those it ran (its row says how many, its ratios against its own first
    one) instead of shrinking everyone's, and one that ran on fewer than three is named."""
    results = {
        "c0": {"a": 10.0, "s": 5.0, "gemm": 100.0, "conv": 50.0, "q": 1.0},
        "c1": {"a": 20.0, "s": 9.0, "gemm": 400.0, "conv": 50.0, "r": 2.0},
        "c2": {"a": 40.0, "s": 21.0, "gemm": 800.0, "conv": 100.0, "r": 3.0, "q": 1.0},
        "c3": {"a": 30.0, "s": 16.0, "gemm": 600.0, "conv": 100.0, "r": 4.0},
    }
    micro = {MICRO: {"gemm": 0.5, "conv": 0.5}}
    v = validate(results, {"a": 1.0}, {"s": 1.0}, {"onnxruntime"}, 0.02, ("r", "q"), micro)
    assert v["configurations"] == 4 and v["predictors_left_out"] == ["q alone (not in the set)"]
    scores = v["scores"]
    assert scores["c1"][MICRO] == pytest.approx(math.sqrt(4 * 1))
    assert scores["c2"][MICRO] == pytest.approx(math.sqrt(8 * 2))
    r = v["predictors"]["r alone (not in the set)"]
    assert r["configurations"] == 3 and v["predictors"]["synthetic"]["configurations"] == 4
    # r's ratios run from c1 (r: 2 -> 3 -> 4), put on the matrix's scale by a's score there.
    assert "r alone (not in the set)" not in scores["c0"]
    assert scores["c2"]["r alone (not in the set)"] == pytest.approx(2.0 * 3 / 2)
    # Its errors on c1, c2, c3: 0, |1.5 / 2 - 1|, |2 / 1.5 - 1|.
    assert r["median_error"] == pytest.approx(0.25) and r["p90_error"] == pytest.approx(0.25 + 0.8 / 12)
    # A baseline that is an earlier network, a file of the network's own name elsewhere,
    # is told apart by its folder: not "synthetic alone" beside the network's own row.
    new, old = "new/synthetic.onnx", "old/synthetic.onnx"
    files = {c: {"a": got["a"], new: got["s"], old: got["r"]} for c, got in results.items() if "r" in got}
    v = validate(files, {"a": 1.0}, {new: 1.0}, {"onnxruntime"}, 0.02, (old,))
    assert sorted(v["predictors"])[-2:] == ["old-synthetic alone (not in the set)", "synthetic"]


def test_each_backend_is_judged_again_against_its_own_first_configuration():
    """A network that reads every ratio within each engine exactly and the level between
    them half off: the figures over all configurations show the miss, those within each
    backend show none, and the table says which is which (not for one backend alone)."""
    ort = {"c0": (10.0, 5.0), "c1": (20.0, 10.0), "c2": (40.0, 20.0)}
    results = {f"onnxruntime {c}": {"a": a, "s": s} for c, (a, s) in ort.items()}
    results |= {f"openvino {c}": {"a": a * 0.75, "s": s * 0.375} for c, (a, s) in ort.items()}
    v = validate(results, {"a": 1.0}, {"s": 1.0}, {"onnxruntime"}, 0.02)
    assert v["predictors"]["synthetic"]["median_error"] == pytest.approx(0.25)  # 3 of 6 off by 1/2
    within = v["within_backend"]
    assert sorted(within) == ["onnxruntime", "openvino"]
    for backend in within:
        mine = within[backend]["synthetic"]
        assert mine["configurations"] == 3 and mine["spearman"] == pytest.approx(1.0)
        assert mine["median_error"] == pytest.approx(0.0) and mine["p90_error"] == pytest.approx(0.0)
        assert mine["pairwise_agreement"] == 1.0
    said = validation_table(v)
    assert "Within each backend, its ratios against its own first configuration" in said
    assert "| openvino    | synthetic | 3" in said and "a alone" not in said.split("Within")[1]
    # A baseline that ran on one backend only (an ONNX file on a native backend's matrix)
    # is judged there alone: on the other it has no figure, not its overall ones again.
    results |= {f"pytorch {c}": {"a": a * 2, "s": s * 2} for c, (a, s) in ort.items()}
    for c, got in results.items():
        if not c.startswith("pytorch"):
            got["r"] = got["a"]
    v = validate(results, {"a": 1.0}, {"s": 1.0}, {"onnxruntime", "openvino"}, 0.02, baselines=("r",))
    assert "r alone (not in the set)" in v["within_backend"]["onnxruntime"]
    assert "r alone (not in the set)" not in v["within_backend"]["pytorch"]
    assert v["held_out_spearman"]["pytorch"]["r alone (not in the set)"] is None
    alone = validate(
        {k: r for k, r in results.items() if k.startswith("onnx")}, {"a": 1.0}, {"s": 1.0}, set(), 0.02
    )
    assert alone["within_backend"] == {} and "Within each backend" not in validation_table(alone)


def _three_configurations() -> dict[str, dict[str, float]]:
    """An application "a" and a network "s" that keep rank on three OpenVINO configurations."""
    return {f"openvino c{i}": {"a": 10.0 + i, "s": 5.0 + i} for i in range(3)}


def test_a_failed_cell_is_named_and_its_configurations_lose_the_application(tmp_path):
    """A cell that fails (an engine crashing on one build) takes its configurations out
    of everyone's score: the output names it and says how many of the matrix's are left,
    and the held-out figure how many it rests on."""
    good = cnn(tmp_path / "good.onnx", width=4, side=8)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    shape = numpy_helper.from_array(np.array([1, 4], np.int64), "shape")
    bad = _save(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])], [x], [y], [shape], tmp_path / "bad.onnx"
    )
    matrix = Matrix(["onnxruntime"], ["fp32"], [1, 2], [1], ["tuned"], [""])
    db = str(tmp_path / "r.sqlite")
    results, left, _ = measure({good: None, bad: None}, [], {}, matrix, tmp_path, min_duration=0.05, db=db)
    assert sorted(results) == ["onnxruntime fp32 b1 1t tuned", "onnxruntime fp32 b2 1t tuned"]
    assert set(results["onnxruntime fp32 b2 1t tuned"]) == {good}  # a batch of 2 into [1, 4]
    [why] = left
    assert why.startswith("bad.onnx on onnxruntime: ") and len(why) > len("bad.onnx on onnxruntime: ")
    v = validate(
        {"onnxruntime c": {"a": 9.0, "s": 4.0}, **_three_configurations()},
        {"a": 1.0},
        {"s": 1.0},
        {"onnxruntime"},
        0.02,
    )
    said = validation_table({**v, "matrix": {"configurations": 6, "left_out": left}})
    assert (
        "4 configurations of the matrix's 6 (the rest lost" in said
        and f"Left out (their configurations lose the artifact): {why}" in said
    )
    assert "ρ held out (openvino, 3 configurations)" in said


def test_an_engine_message_over_several_lines_takes_one_in_left_out():
    """OpenVINO's shape-inference error runs over five lines with blank ones between; the
    table lists one line a failure."""
    said = "Exception from src/core:\n\n[CPU] Eltwise shape infer\n\n  input shapes dim index: 1 mismatch\n"
    record = {"status": "error", "error": said}
    assert failure_line("/r/din-mini.onnx", "openvino", record) == (
        "din-mini.onnx on openvino: Exception from src/core: [CPU] Eltwise shape infer"
        " input shapes dim index: 1 mismatch"
    )
    assert (
        failure_line("m.onnx", "onnxruntime", {"status": "timeout", "error": None})
        == "m.onnx on onnxruntime: timeout"
    )


def test_one_noisy_baseline_cell_is_shown_by_the_median_error_under_every_baseline():
    """A network whose ratios are exact but for its baseline cell, read 20 % slow: against
    that baseline every other configuration is 25 % off; against any other, one is."""
    results = {
        "c0": {"a": 10.0, "s": 4.0},
        "c1": {"a": 20.0, "s": 10.0},
        "c2": {"a": 40.0, "s": 20.0},
        "c3": {"a": 30.0, "s": 15.0},
    }
    v = validate(results, {"a": 1.0}, {"s": 1.0}, {"onnxruntime"}, 0.02)
    assert v["predictors"]["synthetic"]["median_error"] == pytest.approx(0.25)
    assert v["median_error_by_baseline"] == pytest.approx({"min": 0.0, "median": 0.0, "max": 0.25})
    said = validation_table({**v, "matrix": {"cells": 8, "unstable_cells": ["c0: s.onnx"]}})
    assert "1 of 8 cells unstable" in said
    assert "as the baseline in turn: 0.0 % to 25.0 % (median 0.0 %)" in said


def _app(name: str, *ms: float, weight: float = 1.0):
    return {"source": name, "weight": weight, "node_ms": list(ms)}


def test_applications_that_responded_alike_share_a_network():
    """Grouped by their time on each reference relative to the first: a network timed
    whole reads the harmonic mean of its parts' ratios, and the score is their geometric
    mean, so each network holds applications that moved alike."""
    refs = [{"batch": 1}, {"batch": 8}, {"batch": 1, "build": "int8"}]
    apps = [
        _app("cnn-a", 1, 4, 0.5),
        _app("rnn", 2, 2.2, 2),
        _app("cnn-b", 3, 12.5, 1.4),
        _app("mlp", 1, 1, 1),
    ]
    w = {"references": refs, "applications": apps, "nodes": [{"app": i, "us": [1]} for i in (0, 1, 2, 3, 3)]}
    assert split(w, 2) == [[0, 2], [1, 3]]
    assert split(w, 3) == [[0, 2], [1], [3]]
    assert split(w, 9) == [[0], [1], [2], [3]]  # no more networks than applications
    assert split(w, 1) == [[0, 1, 2, 3]]
    same = {**w, "applications": [_app("x", 1, 2, 1), _app("y", 3, 6, 3)]}
    assert split(same, 2) == [[0, 1]]  # identical responses: one network stands for both
    part = subset(w, [1, 3])
    assert [a["source"] for a in part["applications"]] == ["rnn", "mlp"]
    assert [n["app"] for n in part["nodes"]] == [0, 1, 1] and part["references"] == refs


def test_the_fit_mix_is_tilted_so_summed_time_moves_as_the_score():
    """A network that copied its applications exactly would move by their summed time, the
    harmonic mean of their speed ratios, and read the score's gains too small; the mix it
    is fitted to gives the fast responders more of its time, as little as reaches the
    weighted geometric mean on every reference after the first."""
    refs = [{"batch": 1}, {"batch": 8}, {"batch": 1, "build": "int8"}]
    apps = [
        _app("cnn", 1, 3, 0.5),
        _app("rnn", 2, 5, 2.4, weight=2),
        _app("vit", 1, 2, 0.9),
        _app("mlp", 1, 4, 1.2),
    ]
    w = {"references": refs, "applications": apps, "nodes": []}
    weights = np.array([1, 2, 1, 1]) / 5
    ratios = np.exp(response(w))
    score = np.exp(weights @ np.log(ratios))
    assert (weights @ ratios > score * 1.02).all()  # untilted: the summed time slower than the score
    mix = tilted(w)
    assert mix.sum() == pytest.approx(1.0)
    # Within a fifth of the gap on each reference (the ridge keeps a little of it).
    assert (np.abs(mix @ ratios / score - 1) < 0.2 * np.abs(weights @ ratios / score - 1)).all()
    assert (mix > 0.25 * weights).all()  # a tilt, not one application standing for the set
    assert mix[0] > weights[0] and mix[1] < weights[1]  # from the slow responder to the fast
    alike = {**w, "applications": [_app("a", 1, 3, 2), _app("b", 2, 6, 4, weight=3)]}
    assert tilted(alike) == pytest.approx([0.25, 0.75])  # nothing to correct: the weights
    # Two references pulling apart, the score beyond any mix: the tilt stays bounded.
    apart = {**w, "applications": [_app("x", 1, 4, 0.5), _app("y", 1, 1.1, 1), _app("z", 1, 4.2, 0.45)]}
    assert (tilted(apart) > 0.5 / 3).all()


def test_a_workload_is_read_in_its_applications_timed_times():
    """One profile process a reference reads a model's speed up to twice off; the profile
    step's timings (a median of processes in turn) set each application's time on every
    reference, its nodes scaled alike, its class shares as they were."""
    refs = [{"batch": 1}, {"batch": 8}]
    apps = [
        {**_app("cnn", 1.0, 8.0), "timed_ms": [1.0, 4.0], "classes": [{"convolution": 1.0}] * 2},
        {**_app("rnn", 2.0, 4.0), "timed_ms": [2.5, 5.0], "classes": [{"recurrent": 1.0}] * 2},
    ]
    nodes = [{"app": 0, "us": [600.0, 5000.0]}, {"app": 0, "us": [400.0, 3000.0]}]
    nodes.append({"app": 1, "us": [2000.0, 4000.0]})
    w = {"references": refs, "applications": apps, "nodes": nodes}
    timed = at_timed(w)
    assert [a["node_ms"] for a in timed["applications"]] == [[1.0, 4.0], [2.5, 5.0]]
    assert [n["us"] for n in timed["nodes"]] == [[600.0, 2500.0], [400.0, 1500.0], [2500.0, 5000.0]]
    assert score_ratios(timed) == pytest.approx([math.sqrt(4.0 * 2.0)])  # bench's, not 8x and 2x
    assert at_timed({**w, "applications": [apps[0], _app("rnn", 2.0, 4.0)]})["nodes"] == nodes  # one untimed


def test_the_profilers_cost_per_node_is_taken_off_each_node():
    """The fit works in the time bench measures: the profiler's few µs a node come off every
    node alike (none below a tenth of its profiled time), so the nodes sum to the unprofiled
    run and the small ops' shares fall back to what they are without it."""
    nodes = [
        {"node": "conv", "class": "convolution", "us": 100.0},
        {"node": "relu", "class": "activation", "us": 40.0},
        {"node": "add", "class": "elementwise", "us": 5.0},
        {"node": "shape", "class": "shape", "us": 1.0},
    ]
    prof = {"nodes": nodes, "node_ms_per_run": 0.146, "plain_ms_per_run": 0.120, "classes": []}
    fixed = without_profiler(prof)
    us = [n["us"] for n in fixed["nodes"]]
    # The same 10.3 µs off the conv and the ReLU; the add and the shape at their floor.
    assert us == pytest.approx([89.7, 29.7, 0.5, 0.1])
    assert fixed["node_ms_per_run"] == pytest.approx(0.120) and fixed["profiled_node_ms_per_run"] == 0.146
    shares = {c["class"]: c["share"] for c in fixed["classes"]}
    assert shares["convolution"] == pytest.approx(89.7 / 120) and sum(shares.values()) == pytest.approx(1)
    # An unprofiled run longer than the nodes' sum (time between them) scales them up; a
    # profile without one (an older record) is left as it is.
    longer = without_profiler({**prof, "plain_ms_per_run": 0.292})
    assert [n["us"] for n in longer["nodes"]] == pytest.approx([200, 80, 10, 2])
    assert without_profiler({k: v for k, v in prof.items() if k != "plain_ms_per_run"})["nodes"] == nodes


def test_divergence_is_total_variation_of_normalized_shares():
    assert divergence({"a": 2, "b": 2}, {"a": 1, "b": 1}) == 0
    assert divergence({"a": 1}, {"b": 5}) == pytest.approx(1.0)
    assert divergence({"a": 3, "b": 1}, {"a": 1, "b": 1}) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "text", ["1x1", "8xall", "1x1:int8", "32x4:fp16", "8x1@openvino", "1x1:int8@openvino", "1xall@pytorch"]
)
def test_a_reference_reads_back_as_written(text):
    """The profile's --reference default is written from the references it means."""
    assert Reference.parse(text).text == text
    assert Reference.parse(text).native == text.endswith("@pytorch")
    assert Reference.parse(Reference(8, None, "int8").text) == Reference(8, None, "int8")


# -- nodes into units, units into a network ----------------------------------------------


def _priced_workload():
    """Two applications at two batch sizes (convolutions and a softmax; GEMMs and a
    softmax), and each unit priced at what its nodes cost in the workload: the workload,
    each node's unit, the costs by class and of the unit's own class, and the set's µs."""
    nodes = [  # (application, unit, µs at batch 1, µs at batch 4)
        *[(0, 0, 100.0, 350.0)] * 4,
        (0, 2, 20.0, 60.0),
        *[(1, 1, 100.0, 400.0)] * 3,
        (1, 2, 20.0, 60.0),
    ]
    classes = ("convolution", "matmul / gemm", "softmax")
    apps = []
    for a in (0, 1):
        mine = [n for n in nodes if n[0] == a]
        ms = [sum(n[2 + r] for n in mine) / 1000 for r in (0, 1)]
        units = {n[1] for n in mine}
        shares = [
            {classes[u]: sum(n[2 + r] for n in mine if n[1] == u) / 1000 / ms[r] for u in units}
            for r in (0, 1)
        ]
        apps.append({"weight": 1 + a, "node_ms": ms, "classes": shares})
    workload = {
        "applications": apps,
        "references": [{"batch": 1, "threads": 1}, {"batch": 4, "threads": 1}],
        "nodes": [{"app": a, "us": [t1, t4]} for a, _, t1, t4 in nodes],
    }
    per = {u: [n for n in nodes if n[1] == u] for u in range(3)}
    costs = [[{classes[u]: per[u][0][2 + r]} for u in range(3)] for r in (0, 1)]
    main = [[per[u][0][2 + r] for u in range(3)] for r in (0, 1)]
    whole = sum(a["node_ms"][0] for a in apps) * 1000
    return workload, [n[1] for n in nodes], costs, main, whole


def test_the_fit_meets_the_class_shares_when_the_costs_are_the_workloads_own():
    """The fit without the clock: each unit's cost per instance is what its nodes cost in
    the workload, so the shares the counts predict can match the mix on both references
    (the end-to-end test below prices units on a loaded machine and gets what it gets)."""
    from dlbench.harness.synth.counts import solve

    workload, owner, costs, main, whole = _priced_workload()
    counts, targets, predicted = solve(workload, owner, costs, main, 10 * whole)
    assert all(counts > 0)
    for p, t in zip(predicted, targets):
        assert divergence(p, t) <= 0.02, (counts, p, t)


def test_the_ratio_weight_trades_class_shares_for_the_speed_ratio_the_score_is_judged_by():
    """Where the units batch worse than the applications did (the network's convolution 30 %
    slower at batch 4 than the set's), no counts meet both the class shares and the batch-4
    speed ratio: the heavier the ratio weighs, the closer the ratio and the further the
    shares."""
    from dlbench.harness.synth.counts import class_targets, solve

    workload, owner, costs, main, whole = _priced_workload()
    costs[1][0] = {k: v * 1.3 for k, v in costs[1][0].items()}
    main[1][0] *= 1.3
    targets = class_targets(workload)
    aimed = sum(targets[1].values()) / sum(targets[0].values())
    misses, worst = [], []
    for weight in (0.0, 3.0, 10.0):
        _, targets, predicted = solve(workload, owner, costs, main, 10 * whole, ratio_weight=weight)
        misses.append(abs(sum(predicted[1].values()) / sum(predicted[0].values()) / aimed - 1))
        worst.append(max(divergence(p, t) for p, t in zip(predicted, targets)))
    assert misses[0] > misses[1] > misses[2] and misses[2] < 0.01, misses
    assert worst[0] < worst[1] < worst[2], worst


def test_a_native_reference_is_fitted_to_the_applications_total_time_alone():
    """On PyTorch the applications run as their own modules and the network as TorchScript:
    their class shares there (app 1 half in softmax) are the executor's, no counts of these
    units meet them.  Fitted to its total time only, the fit still meets the ONNX
    references' shares and the speed ratio to it; the same shares fitted (were the
    reference to run the ONNX graph) pull the counts off the ONNX references' mix."""
    from dlbench.harness.synth.counts import class_targets, shares_fitted, solve, worst_divergence

    workload, owner, costs, main, whole = _priced_workload()
    there = [150.0, 100.0, 20.0]  # each unit's µs on the third reference, as its nodes'
    apps = workload["applications"]
    ms = [(4 * there[0] + there[2]) / 1000, (3 * there[1] + there[2]) / 1000]
    shares = [{"convolution": 0.97, "softmax": 0.03}, {"matmul / gemm": 0.5, "softmax": 0.5}]
    for a, m, c in zip(apps, ms, shares):
        a["node_ms"].append(m)
        a["classes"].append(c)
    for n in workload["nodes"]:
        n["us"].append(0.0)  # its own ops: by class only
    classes = ("convolution", "matmul / gemm", "softmax")
    costs.append([{classes[u]: there[u]} for u in range(3)])
    main.append(there)
    found = {}
    for backend in ("pytorch", "openvino"):
        workload["references"] = [*workload["references"][:2], {"batch": 1, "threads": 1, "backend": backend}]
        targets = class_targets(workload)
        aimed = sum(targets[2].values()) / sum(targets[0].values())
        _, targets, predicted = solve(workload, owner, costs, main, 10 * whole)
        ratio = sum(predicted[2].values()) / sum(predicted[0].values())
        found[backend] = (worst_divergence(predicted[:2], targets[:2], [True, True]), abs(ratio / aimed - 1))
        assert shares_fitted(workload) == [True, True, backend == "openvino"]
    assert found["pytorch"][0] <= 0.02 and found["pytorch"][1] < 0.01, found
    assert found["openvino"][0] > found["pytorch"][0] + 0.02, found


def test_a_local_refit_moves_at_most_its_radius_of_the_network_s_time():
    """From counts far off the mix (convolutions alone), a refit near them moves toward
    the mix but changes no more of their time, on either reference, than it is allowed;
    allowed none, it keeps them."""
    from dlbench.harness.synth.counts import solve

    workload, owner, costs, main, whole = _priced_workload()
    start = np.array([20, 0, 0])
    per_unit = np.array([[sum(c.values()) for c in ref] for ref in costs])  # [refs, units]

    def worst(counts):
        spent = [{k: v * n for u, n in zip(ref, counts) for k, v in u.items()} for ref in costs]
        return max(divergence(s, t) for s, t in zip(spent, targets))

    for radius in (0.3, 0.6):
        counts, targets, _ = solve(workload, owner, costs, main, 10 * whole, (start, radius))
        moved = per_unit @ np.abs(counts - start) / (per_unit @ start)
        assert (moved <= radius + 1e-9).all() and (moved > radius / 3).any(), (radius, counts, moved)
        assert worst(counts) < worst(start) - 0.1, (radius, counts)
    kept, _, _ = solve(workload, owner, costs, main, 10 * whole, (start, 0.0))
    assert list(kept) == list(start)


def test_batch_axis_is_the_one_that_grew_with_the_batch():
    assert batch_axis([64, 4, 32], [64, 32, 32], 4, 32) == 1  # [seq, batch, hidden]
    assert batch_axis([256, 32], [2048, 32], 4, 32) == 0  # [batch x seq, hidden]
    assert batch_axis([2], [2], 4, 32) is None  # shape arithmetic


def test_profiled_nodes_become_units_with_per_sample_shapes():
    conv = {
        "op": "Conv",
        "inputs": [["float", [4, 16, 32, 32]], ["float", [32, 16, 3, 3]]],
        "outputs": [["float", [4, 32, 16, 16]]],
        "attrs": {
            "kernel_shape": [3, 3],
            "strides": [2, 2],
            "pads": [1, 1, 1, 1],
            "group": 1,
            "activation": "Relu",
        },
    }
    other = {**conv, "inputs": [["float", [8, 16, 32, 32]]], "outputs": [["float", [8, 32, 16, 16]]]}
    u = unit_of(conv, other, 4, 8)
    assert u is not None and (u.op, u.x, u.y, u.attrs["activation"]) == (
        "Conv",
        (1, 16, 32, 32),
        (1, 32, 16, 16),
        "Relu",
    )
    assert u.flops() == 2 * 32 * 16 * 16 * 16 * 9
    gemm = {"op": "Gemm", "inputs": [["float", [256, 64]]], "outputs": [["float", [256, 128]]]}
    g = unit_of(gemm, {**gemm, "inputs": [["float", [512, 64]]], "outputs": [["float", [512, 128]]]}, 4, 8)
    assert g is not None and (g.op, g.x, g.y) == ("MatMul", (64, 64), (64, 128))
    shape = {"op": "Gather", "inputs": [["int64", [4]]], "outputs": [["int64", [1]]]}
    assert not unit_of(shape, shape, 4, 8).batched
    assert unit_of({"op": "ReorderInput", "outputs": [["float", [4, 8, 2, 2]]]}, None, 4, 8) is None


def test_the_network_runs_at_any_batch_and_keeps_its_values_bounded():
    import onnxruntime as ort

    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1] * 4, "group": 1, "activation": "Relu"}
    conv = Unit("Conv", "convolution", (1, 8, 16, 16), (1, 16, 8, 8), 0, 0, attrs)
    lanes = [
        (conv, 20),
        (Unit("MatMul", "matmul / gemm", (16, 32), (16, 32)), 20),
        (Unit("Softmax", "softmax", (16, 32), (16, 32)), 3),
        (Unit("LayerNormalization", "normalization", (16, 32), (16, 32)), 2),
        (Unit("Gelu", "activation", (16, 32), (16, 32)), 2),
        (Unit("Transpose", "data movement", (16, 32), (16, 32)), 2),
        (Unit("Mul", "elementwise", (16, 32), (16, 32)), 30),
        (
            Unit(
                "MaxPool",
                "pooling",
                (1, 16, 8, 8),
                (1, 16, 4, 4),
                0,
                0,
                {"kernel_shape": [2, 2], "strides": [2, 2]},
            ),
            2,
        ),
        (Unit("Gather", "data movement", (2,), (2,), None, None), 5),
    ]
    model = emit.network(lanes, seed=3)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {n.name for n in model.graph.node}
    assert sum(name.startswith("u0_i") and "conv" in name for name in names) == 20  # each its own
    assert len({i.name for i in model.graph.initializer}) == len(model.graph.initializer)
    for batch in (1, 3):
        width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
        x = np.random.default_rng(0).standard_normal((batch, width)).astype(np.float32)
        y, shapes = session.run(None, {"input": x})
        assert y.shape == (batch, 1) and np.isfinite(y).all()
        assert shapes.tolist() == [batch, width]  # five Gathers of [0, 1]: the shape itself
    # The chain's activations stay in a normal range: no decay towards denormals.
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    conv_outs = [n.output[0] for n in model.graph.node if n.name.startswith("u0_i19_")]
    probe.graph.output.append(helper.make_tensor_value_info(conv_outs[-1], TensorProto.FLOAT, None))
    s = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    deep = s.run([conv_outs[-1]], {"input": x})[0]
    assert 1e-3 < float(np.abs(deep).mean()) < 1e3


def _int8_build(lanes, tmp_path) -> str:
    """The network of ``lanes``, built to static INT8 through the build path, as validate
    builds it (its file, verified)."""
    source = str(tmp_path / "net.onnx")
    onnx.save(emit.network(lanes, seed=1), source)
    built, left = build_all([source], ["int8"], tmp_path / "builds", lambda _: None, modes={source: False})
    assert not left and "int8" in built[source], left
    return built[source]["int8"]


def test_the_int8_build_leaves_the_networks_tail_in_float(tmp_path):
    """The tail (the mean of the chain's squares) is the network's own, not a unit: were it
    quantized, ONNX Runtime would move its QuantizeLinear back into the last unit, and a
    final MaxPool there ran on uint8 in NCHW at 27x its float time, a cost no application
    pays."""
    mean = Unit("ReduceMean", "reduction", (16, 32), (16, 1), 0, 0, {"axes": [-1], "keepdims": 1})
    lanes = [(Unit("MatMul", "matmul / gemm", (16, 32), (16, 32)), 2), (mean, 1)]  # a float unit last
    graph = onnx.load(_int8_build(lanes, tmp_path)).graph
    made = {o: n for n in graph.node for o in n.output}
    tail = [n for n in graph.node if n.name.startswith("end_")]
    assert {n.op_type for n in tail} == {"Reshape", "Pow", "ReduceMean"}  # its Identity folded
    quantized = [n.name for n in graph.node if n.op_type == "QuantizeLinear" and made.get(n.input[0]) in tail]
    assert not quantized, quantized
    assert any(n.op_type == "QuantizeLinear" for n in graph.node)  # the units themselves are quantized


@pytest.mark.parametrize("side", [8, 16])
def test_no_maxpool_runs_channels_first_on_uint8_in_the_int8_build(tmp_path, side):
    """After a QLinearConv whose output is its input as it is, ONNX Runtime runs a uint8
    MaxPool as NhwcMaxPool, as in the applications; anywhere else, channels-first at 27x
    its float time, so there it is kept in float (``side`` 16: the convolution's output
    is grown to the MaxPool's input).  Read from ONNX Runtime's own profiler, which names
    the kernel each node ran and its input type."""
    import onnxruntime as ort

    attrs = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1] * 4, "group": 1, "activation": "Relu"}
    pool = {"kernel_shape": [3, 3], "strides": [1, 1], "pads": [1] * 4}
    lanes = [  # more MaxPools than convolutions; a convolution after one reads it quantized
        (Unit("Conv", "convolution", (1, 8, 8, 8), (1, 8, 8, 8), 0, 0, attrs), 2),
        (Unit("MaxPool", "pooling", (1, 8, side, side), (1, 8, side, side), 0, 0, pool), 3),
    ]
    shapes = {j: emit.emitted_shape(u) for j, (u, _) in enumerate(lanes)}
    order = [lanes[j][0].op for j in emit.sequence(dict(enumerate(lanes)), shapes)]
    assert all(order[i - 1] in ("Conv", "MaxPool") for i, o in enumerate(order) if o == "MaxPool"), order
    options = ort.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "trace")
    session = ort.InferenceSession(_int8_build(lanes, tmp_path), options, providers=["CPUExecutionProvider"])
    x = np.ones((1, session.get_inputs()[0].shape[1]), np.float32)
    session.run(None, {session.get_inputs()[0].name: x})
    events = json.loads(Path(session.end_profiling()).read_text())
    pools = [
        (e["args"]["op_name"], next(iter(e["args"]["input_type_shape"][0])))
        for e in events
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and "MaxPool" in e["args"]["op_name"]
    ]
    kept = ("NhwcMaxPool", "uint8") if side == 8 else ("MaxPool", "float")
    assert len(pools) == 3 and all(p == kept for p in pools), pools


def test_a_bridge_takes_the_fewest_nodes_and_keeps_each_sample_its_own():
    """A bridge is a dispatch the applications did not pay: within the rank one Slice
    where that crops to the next input, one Tile where it grows one axis of whole blocks,
    one Reshape where only the shape differs; the flat path where a tile within the rank
    would copy short runs (which ONNX Runtime moves several times slower).
    Across the chain a sample's values stay its own: a batch of three reads what each
    sample reads alone."""
    import onnxruntime as ort

    add = Unit("Add", "elementwise", (1, 20, 16), (1, 20, 16))
    mean = Unit("ReduceMean", "reduction", (1, 20, 16), (1, 20, 1), 0, 0, {"axes": [-1], "keepdims": 1})
    pool = {"kernel_shape": [2, 2], "strides": [2, 2]}
    crop = Unit("MaxPool", "pooling", (1, 16, 6, 6), (1, 16, 3, 3), 0, 0, pool)
    wide = Unit("BatchNormalization", "normalization", (1, 40, 3, 3), (1, 40, 3, 3))
    matmul = Unit("MatMul", "matmul / gemm", (48, 12), (48, 7))
    assert emit.bridge_steps((1, 20, 16), 0, add) == []  # it fits: no bridge
    assert emit.bridge_steps((6, 1, 10), 1, Unit("LSTM", "other", (6, 1, 10), (6, 2, 1, 8), 1, 2)) == []
    assert emit.bridge_steps((1, 16, 8, 8), 0, crop) == [("Slice", [6, 6], [2, 3])]
    assert emit.bridge_steps((1, 16, 3, 3), 0, wide) == [("Tile", [1, 3, 1, 1], []), ("Slice", [40], [1])]
    assert emit.bridge_steps((12, 48), 0, matmul) == [("Reshape", [-1, 12], [])]
    # short runs, or another rank: through the flat tensor, each step only where asked for
    assert emit.bridge_steps((1, 20, 1), 0, add) == [
        ("Reshape", [-1, 20], []),
        ("Tile", [1, 16], []),
        ("Reshape", [-1, 20, 16], []),
    ]
    assert emit.bridge_steps((1, 10), 0, add) == [("Tile", [1, 32], []), ("Reshape", [-1, 20, 16], [])]
    rows = Unit("MatMul", "matmul / gemm", (12, 32), (12, 8))  # 12 rows a sample: runs of one value
    assert emit.bridge_steps((12, 1), 0, rows) == [
        ("Reshape", [-1, 12], []),
        ("Tile", [1, 32], []),
        ("Reshape", [-1, 32], []),
    ]
    assert emit.bridge_steps((1, 16, 4, 4), 0, crop) == [
        ("Reshape", [-1, 256], []),
        ("Tile", [1, 3], []),
        ("Slice", [576], [1]),
        ("Reshape", [-1, 16, 6, 6], []),
    ]

    lanes = [(add, 6), (mean, 6), (crop, 3), (wide, 2), (matmul, 2)]
    model = emit.network(lanes, seed=1)
    bridged = [n for n in model.graph.node if n.op_type in ("Reshape", "Tile", "Slice")]
    for i in range(1, 5):  # each Add after a reduction: no Slice where the tile is exact
        steps = [n.op_type for n in bridged if n.name.startswith(f"u0_i{i}_")]
        assert steps == ["Reshape", "Tile", "Reshape"]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    width = model.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    x = np.random.default_rng(2).standard_normal((3, width)).astype(np.float32)
    together = session.run(["output"], {"input": x})[0]
    alone = [session.run(["output"], {"input": x[i : i + 1]})[0] for i in range(3)]
    np.testing.assert_allclose(together, np.concatenate(alone), rtol=1e-5)
    assert len(set(np.round(together.ravel(), 6))) == 3  # three samples, three values


def _conv_rms(model, x):
    """The RMS of every Conv's output in ``model`` on ``x``."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    convs = [n.output[0] for n in model.graph.node if n.op_type == "Conv"]
    probe.graph.output.extend(helper.make_tensor_value_info(c, TensorProto.FLOAT, None) for c in convs)
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    return [float(np.sqrt(np.mean(np.square(v, dtype=np.float64)))) for v in session.run(convs, {"input": x})]


def test_a_long_chain_is_balanced_to_unit_scale(monkeypatch):
    """A convolution without activation after a ReLU keeps the second moment and the ReLU
    halves it: 60 such pairs drift to ~1e-9, FP16's underflow.  The emitted network's
    weighted outputs stay at unit scale, on an input it was not balanced on too."""
    plain = Unit(
        "Conv", "convolution", (1, 8, 8, 8), (1, 8, 8, 8), 0, 0, {"kernel_shape": [3, 3], "pads": [1] * 4}
    )
    relu = Unit("Relu", "activation", (1, 8, 8, 8), (1, 8, 8, 8))
    lanes = [(plain, 60), (relu, 60)]
    x = np.random.default_rng(9).standard_normal((3, 512)).astype(np.float32)
    rms = _conv_rms(emit.network(lanes), x)
    assert len(rms) == 60 and all(0.5 < r < 2 for r in rms), rms
    monkeypatch.setattr(emit, "balanced", lambda model: model)  # fan-in scaling alone
    drifted = _conv_rms(emit.network(lanes), x)
    assert drifted[-1] < 1e-3 * drifted[0], drifted


# -- profile -> generate -> validate ---------------------------------------------------


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("synth")


@pytest.fixture(scope="module")
def cli_module(home):
    """The real CLI (``run_cli``), for a module's shared steps: in ``home``, with a
    results database of its own."""

    def run(*args: str):
        return run_cli(*args, env={"DLBENCH_DB": str(home / "results.sqlite")}, cwd=home)

    return run


@pytest.fixture(scope="module")
def synthesized(home, cli_module):
    d = home
    apps = [cnn(d / "cnn.onnx"), attention(d / "attention.onnx")]
    workload, net = d / "workload.json", d / "net" / "synthetic.onnx"
    named = ["cnn.onnx", "attention.onnx=2"]  # as a user in their folder names them
    refs = ["--reference", "1x1,4x1", "--timings", "2"]
    out = cli_module("synth", "profile", *named, *refs, "-o", str(workload), "-q")
    assert out.returncode == 0, out.stderr[-3000:]
    out = cli_module(
        "synth",
        "generate",
        str(workload),
        "-o",
        str(net),
        "--networks",
        "2",
        "--clusters",
        "16",
        "--timings",
        "2",
        "--refits",
        "0",
        "--local-refits",
        "1",
        "--ratio-weight",
        str(RATIO_WEIGHT),
        "-q",
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return d, apps, json.loads(workload.read_text()), json.loads(net.with_suffix(".json").read_text()), out


def test_profile_records_every_node_with_its_shapes_times_and_motifs(synthesized):
    _, _, w, _, _ = synthesized
    # Each named relative to the workload's folder, so it moves with its files.
    assert [a["source"] for a in w["applications"]] == ["cnn.onnx", "attention.onnx"]
    assert [a["weight"] for a in w["applications"]] == [1, 2]
    assert [r["batch"] for r in w["references"]] == [1, 4]
    convs = [n for n in w["nodes"] if n["app"] == 0 and n["class"] == "convolution"]
    assert len(convs) == 6 and all(n["unit"] and len(n["us"]) == 2 and n["flops"] > 0 for n in convs)
    assert {n["shape_class"] for n in convs} == {"conv 3x3", "conv 3x3/2", "conv 1x1"}
    assert w["applications"][1]["motifs"]["attention"] == 1


def test_the_profiles_are_stored_and_the_report_shows_them(synthesized, cli_module):
    d, _, _, _, _ = synthesized
    out = cli_module("report", "--out", str(d / "report.md"))
    assert out.returncode == 0, out.stderr
    text = (d / "report.md").read_text()
    section = text[text.index("Where the time goes") :]
    assert "cnn.onnx" in section and "attention.onnx" in section and "convolution" in section


# Two applications of 6 and 5 nodes leave the fit one to three instances to place, and the
# network's glue (its lanes' slicing, NCHWc reorders and balancing, which no unit is) weighs
# beside so little work: 12 to 18 % of a toy network's time on a quiet machine, and more
# under another test worker's load, which slows those small memory-bound nodes most and
# leaves the applications (97 % convolution; matmul) nearly as they were.  CI's run
# measured 0.237 against its workload, its two profiles 0.011 apart: a network of one
# convolution whose glue had grown to a quarter of its time.  So the check holds apart
# what the fit chose from what the emitter adds: the work classes (what is left once the
# classes no placed unit has are set aside, on both sides) against a tight bound, which a
# class left out of the fit breaks (attention without its layer norm measures 0.13); the
# glue against a loose one, which a runaway emitter breaks.  The real models' figures
# (issue 33) meet the self-check's own 0.05 or say by how much they miss.
WORK_BOUND = 0.12
GLUE_BOUND = 0.40


def _work_and_glue(
    share: dict[str, float], target: dict[str, float], placed: set[str]
) -> tuple[float, float]:
    """The divergence over the work classes, and the glue's share of the network's time."""
    glue = {c for c in share if c not in placed}

    def work(d: dict[str, float]) -> dict[str, float]:
        return {c: x for c, x in d.items() if c not in glue}

    return divergence(work(share), work(target)), sum(share[c] for c in glue) / sum(share.values())


def test_generate_meets_the_time_shares_it_was_fitted_to(synthesized):
    d, apps, w, net, out = synthesized
    # Two applications that responded differently to the references: a network each, each
    # weighing what its application weighs (1 and 2), named after --out.
    nets = net["networks"]
    assert [(n["onnx"], n["applications"], n["weight"]) for n in nets] == [
        ("synthetic-1.onnx", ["../cnn.onnx"], pytest.approx(1 / 3)),
        ("synthetic-2.onnx", ["../attention.onnx"], pytest.approx(2 / 3)),
    ]  # the applications named relative to the description, as in its list of them:
    assert [a["source"] for a in net["applications"]] == ["../cnn.onnx", "../attention.onnx"]
    assert not (d / "net" / "synthetic.onnx").exists()
    assert net["self_check"] == ("ok" if all(n["self_check"] == "ok" for n in nets) else "over the limit")
    texts = [Reference.from_json(r).text for r in net["references"][1:]]
    moved = [line for n in nets if (line := moved_line(n["score_moved"], texts))]
    assert out.returncode == (0 if net["self_check"] == "ok" and not moved else 1)
    assert all(line in out.stdout for line in moved)
    # Neither toy application has recurrent layers or attention products: static INT8 for
    # the networks, the cells and replays, as for the applications.
    assert not any(e["int8_dynamic"] for e in nets + net["micro_cells"] + net["replays"])
    # Each file carries its mode, so a build of it by any path takes the set's, not the
    # one its own graph would choose.
    for e in nets + net["micro_cells"] + net["replays"]:
        carried = onnx.load(str(d / "net" / e["onnx"]), load_external_data=False).metadata_props
        assert {p.key: p.value for p in carried}["dlbench.int8_mode"] == "static", e["onnx"]
    for n in nets:
        # One application a network: its mix is that application, and the network's time
        # ratios between references are measured against the score's.
        assert n["fit_mix"] == [pytest.approx(1.0)]
        # Timed on every reference in its own processes (two each), apart from its profiles,
        # as its application was by the profile step; the closest fits timed again in turn
        # with the application: the ratios it was kept by are those timings', against its
        # application's (the score validate measures).
        [app] = [a for a in w["applications"] if Path(a["source"]).name == Path(n["applications"][0]).name]
        timed, own, [again] = n["timed_ms"], app["timed_ms"], n["score_ms"]
        assert len(timed) == len(own) == len(again) == len(net["references"]) and min(timed + own + again) > 0
        assert n["score_ratios"] == pytest.approx([a / again[0] for a in again[1:]])
        assert n["measured_ratio_miss"] == pytest.approx(
            [t / timed[0] / (a / again[0]) - 1 for t, a in zip(timed[1:], again[1:])]
        )
        # Every fit is listed; a local refit was made near the closest fit before it (by
        # its first timing); with more than one fit, the closest few were timed again and
        # the one kept is the closest of those on them.
        fits = n["fits"]
        assert [f["fit"] for f in fits] == list(range(1, len(fits) + 1))
        assert net["ratio_weight"] == RATIO_WEIGHT  # the fixture's, not the default

        def _first_miss(fit):
            return _miss(fit, fit["time_ratio_miss"], RATIO_WEIGHT)

        for i, f in enumerate(fits):
            assert f["near"] is None or f["near"] == min(fits[:i], key=_first_miss)["fit"]
        finals = [f for f in fits if f["timed_again"] is not None]
        if len(fits) == 1:
            assert not finals and again == pytest.approx(own) and n["kept_fit"] == 1
            assert n["score_moved"] is None
        else:
            # The score the finalists were judged by, against the one the fits aimed at.
            assert n["score_moved"] == pytest.approx(
                [a / again[0] / (o / own[0]) - 1 for a, o in zip(again[1:], own[1:])]
            )
            first = sorted(fits, key=_first_miss)[: len(finals)]
            assert 2 <= len(finals) <= 4 and {f["fit"] for f in finals} == {f["fit"] for f in first}
            kept = min(finals, key=lambda f: _miss(f, f["timed_again"], RATIO_WEIGHT))
            assert n["kept_fit"] == kept["fit"]
            assert n["measured_ratio_miss"] == pytest.approx(kept["timed_again"])
        # Its profiles were scaled to its timings, and its run time is held against its
        # application's timed one: bench's times on both sides.
        assert n["measured_ms"] == pytest.approx(timed) and n["applications_ms"] == pytest.approx(own)
        assert n["shares_fitted"] == [True] * len(net["references"])  # none is native
        assert n["self_check"] == (
            "ok" if max(n["predicted_divergence"]) <= net["divergence_limit"] else "over the limit"
        )
        # The budgets its fit tried, doubling; the one kept the smallest that passed, or
        # none passing, the smallest within 0.01 of the best.
        curve = [(b["budget_us"], b["predicted_divergence"]) for b in n["budget_curve"]]
        assert all(b2 <= 2 * b1 * 1.000001 and b2 > b1 for (b1, _), (b2, _) in zip(curve, curve[1:]))
        best = min(d for _, d in curve)
        kept = min(b for b, d in curve if d <= max(best + 0.01, net["divergence_limit"]))
        assert n["budget_us"] == pytest.approx(kept)
        assert dict(curve)[n["budget_us"]] == pytest.approx(max(n["predicted_divergence"]))
        assert sum(n["target_class_us"][0].values()) == pytest.approx(n["budget_us"])  # the kept fit's
        # Both builds made through the build path; one the verification could not pass (a
        # toy network's output washed out by its chain, or over its tolerance) is listed
        # with the verdict, and a failed build would name no verdict.
        judged = {x.split(" --to ")[1].split(":")[0] for x in n["builds_left_out"]}
        assert set(n["builds"]) | judged == {"int8", "fp16"}, n["builds_left_out"]
        assert all("cannot judge" in x or "tolerance" in x for x in n["builds_left_out"]), n
        # The prediction is not held to a bound: it prices the glue on an earlier profile
        # than the one it is checked against (a fresh-clone run on two busy workers
        # predicted 0.319 for a network that measured 0.122).  What it runs is the check,
        # its record's measured divergence the one its shares give:
        placed = {u["cls"] for u in n["units"] if u["count"]}
        pairs = list(zip(n["measured_class_share"], n["target_class_us"]))
        assert n["measured_divergence"] == pytest.approx([divergence(m, t) for m, t in pairs])
        for (share, target), noise in zip(pairs, n["repeat_divergence"]):
            work, glue = _work_and_glue(share, target, placed)
            assert work <= WORK_BOUND + 2 * noise, (work, out.stdout)
            assert glue <= GLUE_BOUND + noise, (glue, out.stdout)
    # The benchmark's run time is its networks' together.
    assert net["measured_ms"] == pytest.approx([sum(x) for x in zip(*(n["measured_ms"] for n in nets))])
    kinds = [{n.op_type for n in onnx.load(str(d / "net" / e["onnx"])).graph.node} for e in nets]
    assert "Conv" in kinds[0] and "MatMul" in kinds[1]
    # The record says what each graph holds: the units it placed cover its workload's heavy
    # class.  How many instances it took is the fit's to choose (CI's loaded run met the
    # shares to 0.007 with one of each), so no count is asked for.
    placed = [{u["cls"] for u in n["units"] if u["count"]} for n in nets]
    assert "convolution" in placed[0] and "matmul / gemm" in placed[1], nets
    assert (
        "divergence" in out.stdout
        and "application set" in out.stdout
        and "budgets its fit tried" in out.stdout
        and "time ratios against the score's" in out.stdout
    )


def _miss(fit, ratio_misses, weight):
    """A fit as generate judges it: its profile's worst class divergence plus how far its
    time ratios are from the score's, by the description's ratio weight."""
    return fit["measured_divergence"] + weight * sum(abs(math.log1p(m)) for m in ratio_misses)


# The files synth generate writes for the two-application set, after "synthetic": the
# networks, the micro cells and the applications' layer replays.
GENERATED = ["-1", "-2", ".micro-conv", ".micro-gemm", ".replay-0", ".replay-1"]


def test_the_matrix_s_backend_options_reach_every_cell_of_their_backend(tmp_path):
    """What gets round an engine's crash (OpenVINO's at a fixed shape: -O reshape=off) must
    be settable for a whole validation; a backend that declares no such option ignores it."""
    net = cnn(tmp_path / "net.onnx", width=4, side=8)
    matrix = Matrix(["onnxruntime", "openvino"], ["fp32"], [2], [1], ["tuned"], [""], {"reshape": "off"})
    db = str(tmp_path / "r.sqlite")
    results, left, _ = measure({net: None}, [], {}, matrix, tmp_path, min_duration=0.05, db=db)
    assert left == [] and sorted(results) == ["onnxruntime fp32 b2 1t tuned", "openvino fp32 b2 1t tuned"]
    runtime = {r["backend"]: r["context"]["runtime"] for r in ResultStore(db).records()}
    assert runtime["openvino"]["shapes"] == "dynamic (-O reshape=off)"
    assert "reshape" not in runtime["onnxruntime"].get("options", {})
    said = validation_table(
        {**validate(_three_configurations(), {"a": 1.0}, {"s": 1.0}, {"onnxruntime"}, 0.02),
         "matrix": {"configurations": 3, "options": {"reshape": "off"}}}
    )  # fmt: skip
    assert "3 configurations, backend options reshape=off" in said


def test_validate_scores_the_network_against_the_applications_over_a_matrix(synthesized, cli_module):
    d, apps, _, _, _ = synthesized
    args = ["--backends", "onnxruntime", "--builds", "fp32,int8", "--batch-sizes", "1,4", "--threads", "1"]
    args += ["--repeats", "2"]  # the networks' cells in two processes each, the applications' in one
    # Run from the description's folder, not the one the applications were named from.
    out = run_cli(
        "synth", "validate", str(d / "net" / "synthetic.json"), *args, "--min-duration", "0.1",
        env={"DLBENCH_DB": str(d / "results.sqlite")}, cwd=d / "net",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    v = json.loads((d / "net" / "validation.json").read_text())
    # Two rounds by default, the second in the first's reverse order (A B, B A).
    said = [line.split(" on ")[1] for line in out.stderr.splitlines() if line.startswith("bench ")]
    first = [x.removesuffix(" (round 1 of 2)") for x in said if x.endswith("(round 1 of 2)")]
    second = [x.removesuffix(" (round 2 of 2)") for x in said if x.endswith("(round 2 of 2)")]
    assert len(first) >= 2 and second == first[::-1] and len(said) == 2 * len(first), said
    assert v["matrix"]["configurations"] == 8  # 2 builds x 2 batch sizes x 2 allocators
    # A configuration counts where every artifact ran: an application whose INT8 build
    # did not verify takes its INT8 configurations out, and says so.
    synth = [str(d / "net" / f"synthetic-{i}.onnx") for i in (1, 2)]
    complete = [c for c, got in v["measured"].items() if all(a in got for a in [*apps, *synth])]
    left = v["matrix"]["left_out"]
    assert v["configurations"] == len(complete) >= 4 and len(complete) == (8 if not left else 4)
    assert set(v["predictors"]) == {"synthetic", "cnn alone", "attention alone", MICRO, REPLAY}
    assert v["predictors_left_out"] == []
    # Every timed cell counted, the unstable ones named: the noise the figures carry.
    assert (
        v["matrix"]["cells"] >= len(complete) * 4
        and len(v["matrix"]["unstable_cells"]) <= v["matrix"]["cells"]
    )
    by = v["median_error_by_baseline"]
    assert by["min"] <= v["predictors"]["synthetic"]["median_error"] <= by["max"]
    # Each cell's figure is its two rounds' median; the applications' score in each round
    # against that round's baseline gives the floor the pairs are counted beyond.
    per_round = v["measured_rounds"]
    assert {c: sorted(x) for c, x in per_round.items()} == {c: sorted(x) for c, x in v["measured"].items()}
    for c, got in per_round.items():
        for a, figures in got.items():
            assert len(figures) == 2 and v["measured"][c][a] == pytest.approx(sum(figures) / 2)
    base = v["baseline"]

    def score(config: str, r: int, files: list[str] = apps) -> float:
        logs = [w * math.log(per_round[config][a][r] / per_round[base][a][r]) for a, w in zip(files, (1, 2))]
        return math.exp(sum(logs) / 3)

    def spread(config: str, files: list[str] = apps) -> float:
        one, two = score(config, 0, files), score(config, 1, files)
        return abs(one - two) / ((one + two) / 2)

    spreads = {c: spread(c) for c in v["scores"] if c != base}
    assert v["rounds"]["score_spread_by_configuration"] == pytest.approx(spreads)
    # The synthetic score's own spread beside it, over the same rounds: its networks' in
    # each round against that round's baseline, weighted as the score weights them.
    own = sorted(spread(c, synth) for c in v["scores"] if c != base)
    assert v["rounds"]["synthetic_spread"] == pytest.approx(
        {"median": statistics.median(own), "p90": percentile(own, 90)}
    )
    assert "The synthetic score's own by" in out.stdout
    assert v["rounds"]["rounds"] == v["rounds"]["asked"] == 2
    assert v["noise_floor"] == pytest.approx(max(0.02, v["rounds"]["score_spread"]["median"]))
    assert "Each cell ran in 2 rounds" in out.stdout
    # Every generated network's cell ran in two processes, its figure their median; each
    # application's in one.
    assert v["processes"] == {f"synthetic{s}.onnx": 2 for s in GENERATED}
    assert "Processes per cell and round, taking turns with the applications' (one each)" in out.stdout
    # Round 2 ran every cell in round 1's reverse order, within each block too.
    timed = ResultStore(str(d / "results.sqlite")).records("kind = 'bench'")
    cell = [
        (Path(r["context"]["artifact"]["label"]).name, r["batch_size"], r["context"]["allocator"]["name"])
        for r in timed
    ]
    assert cell[len(cell) // 2 :] == cell[: len(cell) // 2][::-1], cell
    # Each generated network's cell ran in two processes a round, the applications' in one,
    # and a network's two took turns with the applications: one ran between them.
    first = cell[: len(cell) // 2]
    for name in {c[0] for c in first}:
        runs = [c for c in first if c[0] == name]
        assert len(runs) == len(set(runs)) * (2 if name.startswith("synthetic") else 1), (name, runs)
    order = [c[0] for c in first if c[1:] == first[0][1:]]  # one cell's, through its block
    network = [i for i, n in enumerate(order) if n == "synthetic-1.onnx"]
    assert any(order[i] in ("cnn.onnx", "attention.onnx") for i in range(network[0], network[1])), order
    for j in v["predictors"].values():
        assert -1 <= j["spearman"] <= 1 and 0 <= j["median_error"] <= j["p90_error"]
    # Each config's actual score is the weighted geometric mean of the two applications',
    # and the synthetic one the same mean of its two networks' (weights 1/3 and 2/3).
    got = v["measured"]
    for config, s in v["scores"].items():
        base = v["baseline"]
        for files, key in ((apps, "actual"), (synth, "synthetic")):
            ratio = [got[config][a] / got[base][a] for a in files]
            assert s[key] == pytest.approx(math.exp((math.log(ratio[0]) + 2 * math.log(ratio[1])) / 3))
    assert (d / "net" / "builds" / "synthetic-1.int8.onnx").is_file()  # verified through build
    assert "Derived score" in out.stdout


def test_a_predictors_processes_take_turns_with_the_applications():
    """Four applications, a network of four processes, two of two, four of one each:
    every application's turn is followed by one of each kind."""
    spread = rounds.interleaved(list("abcd"), {"s": 4, "m1": 2, "m2": 2, "r0": 1, "r1": 1, "r2": 1, "r3": 1})
    assert spread == ["a", "s", "m1", "r0", "b", "s", "m2", "r1", "c", "s", "m1", "r2", "d", "s", "m2", "r3"]
    assert rounds.interleaved([], {"s": 2, "t": 1}) == ["s", "s", "t"]  # no application: in turn
    assert rounds.interleaved(["a", "b"], {}) == ["a", "b"]
    assert rounds.in_order([1, 2, 3], 1) == [1, 2, 3] and rounds.in_order([1, 2, 3], 2) == [3, 2, 1]


def test_a_predictor_of_few_networks_is_timed_in_as_many_processes_as_the_set_has_applications():
    """The applications' score is a mean over one process of each of ten applications; the
    synthetic network alone is one network, the micro cells two, the replays one per
    application: each predictor's processes together match the set's."""
    from dlbench.harness.synth.steps import _processes

    one, two, ten = {"s.onnx": 1.0}, {"m1.onnx": 0.5, "m2.onnx": 0.5}, {f"r{i}.onnx": 0.1 for i in range(10)}
    got = _processes(10, None, one, two, ten, {})
    assert got == {"s.onnx": 10, "m1.onnx": 5, "m2.onnx": 5, **dict.fromkeys(ten, 1)}
    assert _processes(3, None, two) == {"m1.onnx": 2, "m2.onnx": 2}  # never fewer than the set's
    assert _processes(10, 3, one, ten) == {"s.onnx": 3, **dict.fromkeys(ten, 3)}  # --repeats 3


def test_rounds_tell_a_drift_from_noise():
    """A machine at half speed in the second round moves every cell by 67 % and no score
    (each round's ratios are against that round's baseline); one cell slow in one round
    moves its configuration's score, and its figure is the rounds' median."""
    apps = {"a.onnx": 1.0, "b.onnx": 1.0}
    raw = {
        "base": {"a.onnx": [100.0, 50.0], "b.onnx": [10.0, 5.0]},
        "drift": {"a.onnx": [200.0, 100.0], "b.onnx": [20.0, 10.0]},
        "paused": {"a.onnx": [100.0, 50.0], "b.onnx": [10.0, 2.5]},
    }
    configs = list(raw)
    got = rounds.noise(raw, configs, lambda r: scores(r, apps, {}, configs)[1])
    assert got is not None and got["rounds"] == 2
    # paused: sqrt(1 * 1) = 1 in round 1, sqrt(1 * 0.5) in round 2
    assert got["score_spread_by_configuration"] == pytest.approx(
        {"drift": 0.0, "paused": (1 - math.sqrt(0.5)) / ((1 + math.sqrt(0.5)) / 2)}
    )
    assert got["cell_spread"]["median"] == pytest.approx(50 / 75)
    assert rounds.medians(raw)["paused"] == {"a.onnx": 75.0, "b.onnx": 6.25}
    once = {c: {a: v[:1] for a, v in cells.items()} for c, cells in raw.items()}
    assert rounds.noise(once, configs, lambda r: scores(r, apps, {}, configs)[1]) is None
    assert rounds.ordered("abc", 3) == [["a", "b", "c"], ["c", "b", "a"], ["a", "b", "c"]]


def test_a_score_that_moved_since_the_profile_is_named_by_reference():
    """The zoo set's profile timed in a slow spell, against its playoff an hour later
    (session 25's r27): every fit aimed at the first.  A quiet profile read its playoff
    within 1.5 %, which is not a move."""
    refs = ["8x1", "1xall", "8xall", "1x1:int8", "1x1@openvino"]
    profiled = np.array([6.24, 1.012, 4.146, 1.277, 0.891])
    moved = score_moved(profiled, np.array([5.689, 0.946, 3.775, 1.105, 0.824]))
    assert moved == pytest.approx(
        [5.689 / 6.24 - 1, 0.946 / 1.012 - 1, 3.775 / 4.146 - 1, -0.1347, -0.0752], abs=1e-4
    )
    line = moved_line(moved, refs)
    assert line is not None and line.startswith(
        "the applications' score moved since their profile (beyond 5%)"
    )
    assert "8x1 -8.8%, 1xall -6.5%, 8xall -8.9%, 1x1:int8 -13.5%, 1x1@openvino -7.5%;" in line
    assert "profile them again on a quiet machine" in line
    quiet = score_moved(profiled, profiled * np.array([1.015, 0.99, 1.0, 1.01, 0.985]))
    assert max(abs(m) for m in quiet) < SCORE_MOVED_LIMIT and moved_line(quiet, refs) is None
    # Only the references beyond the limit are named; no playoff, no line.
    assert moved_line([0.01, -0.06], ["8x1", "1xall"]) == moved_line([-0.06], ["1xall"])
    assert "8x1" not in moved_line([0.01, -0.06], ["8x1", "1xall"]) and moved_line(None, refs) is None


@pytest.mark.parametrize(
    "args, says",
    [
        (["profile", "missing.onnx"], "no such file"),
        (["profile", "a.onnx=x"], "must be a number"),
        (["profile", "a.onnx", "--reference", "1x1,1xall"], "different batch sizes"),
        (
            ["profile", "a.onnx", "--reference", "1x1@pytorch,1x1,8x1"],
            "the first reference must run the ONNX",
        ),
        (["generate", "notes.json"], "cannot read it"),
        (["validate", "workload.json"], "not dlbench synth generate's output"),
        (["validate", "old.json"], "written by an older dlbench synth generate; generate it again"),
        (["generate", "workload.json", "--networks", "0"], "--networks 0: give at least 1"),
        (["generate", "workload.json", "--timings", "-1"], "--timings -1: give at least 0"),
        (["generate", "workload.json", "--local-refits", "-1"], "--local-refits -1: give at least 0"),
        (["generate", "workload.json", "--ratio-weight", "-1"], "--ratio-weight -1.0: give 0 or more"),
        (["profile", "a.onnx", "--timings", "-1"], "--timings -1: give at least 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, cli, args, says):
    (tmp_path / "a.onnx").write_bytes(b"")
    (tmp_path / "workload.json").write_text(json.dumps({"kind": "dlbench-synth-workload"}))
    (tmp_path / "old.json").write_text(json.dumps({"kind": "dlbench-synth-network", "onnx": "a.onnx"}))
    fixed = [str(tmp_path / a) if a.endswith((".onnx", ".json")) and "=" not in a else a for a in args]
    fixed = [str(tmp_path / a) if "=" in a else a for a in fixed]
    out = cli("synth", *fixed)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_validate_refuses_a_native_backend_for_applications_without_a_model_name(synthesized, cli_module):
    """Applications given to synth profile as ONNX files have no native form: no
    configuration on PyTorch could score the set, so the backend is refused before
    anything is built or timed."""
    d, _, _, _, _ = synthesized
    args = ["--backends", "onnxruntime,pytorch", "--batch-sizes", "2", "--threads", "1", "--rounds", "1"]
    out = cli_module(
        "synth", "validate", str(d / "net" / "synthetic.json"), *args, "-o", str(d / "refused.json")
    )
    assert out.returncode == 2, out.stderr[-3000:]
    assert out.stderr.strip() == (
        "dlbench synth: error: --backends pytorch: 2 of the 2 applications have no model name to run there "
        "(cnn.onnx first), so none of its configurations could score the set; give them to synth "
        "profile by name, or leave pytorch out"
    )
    assert not (d / "refused.json").exists()


def test_validate_runs_the_networks_own_framework_versions_on_the_native_backends(synthesized, cli_module):
    """The network's TorchScript and Keras versions bench on PyTorch and TensorFlow, and
    an application profiled by name runs there as that model.  The fixture's networks are
    described here as standing for lenet5 (validate runs what a description names; how
    well they predict it is not this test's question)."""
    d, _, _, net, _ = synthesized
    for i, n in enumerate(net["networks"], 1):
        versions = {"pytorch": f"synthetic-{i}.pt", "tensorflow": f"synthetic-{i}.keras"}
        assert n["frameworks"] == versions, n["framework_errors"]
    named = d / "named"
    out = cli_module(
        "synth",
        "profile",
        "lenet5",
        "--reference",
        "1x1,4x1",
        "--timings",
        "0",
        "-o",
        str(named / "w.json"),
        "-q",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    [app] = json.loads((named / "w.json").read_text())["applications"]
    described = {
        **net,
        "applications": [{"source": "../named/lenet5.onnx", "weight": 1.0, "native": app["native"]}],
    }
    (d / "net" / "named.json").write_text(json.dumps(described))
    args = [
        "--backends",
        "pytorch,tensorflow",
        "--batch-sizes",
        "2",
        "--threads",
        "1",
        "--allocators",
        "tuned",
    ]
    args += ["--rounds", "1", "-o", str(d / "v.json")]
    out = cli_module("synth", "validate", str(d / "net" / "named.json"), *args)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    v = json.loads((d / "v.json").read_text())
    # Builds are ONNX files: fp32 only on a native backend; nothing left out.
    assert v["matrix"]["configurations"] == 2 and v["matrix"]["left_out"] == []
    # The networks and the generated baselines (micro cells, the two applications' layer
    # replays), each through its own framework version, and the application by its name.
    made = [str(d / "net" / f"synthetic{s}.onnx") for s in GENERATED]
    for entry in net["micro_cells"] + net["replays"]:
        stem = entry["onnx"].removesuffix(".onnx")
        assert entry["frameworks"] == {"pytorch": f"{stem}.pt", "tensorflow": f"{stem}.keras"}, entry
    lenet = str(d / "named" / "lenet5.onnx")  # as the description's folder opens it
    assert {c: sorted(got) for c, got in v["measured"].items()} == {
        f"{backend} fp32 b2 1t tuned": sorted([*made, lenet]) for backend in ("pytorch", "tensorflow")
    }
    # Each configuration scored: the set's one application against its first.
    assert set(v["scores"]) == set(v["measured"]) and all(s["actual"] > 0 for s in v["scores"].values())


def test_a_built_reference_fits_the_network_to_the_applications_int8_builds(tmp_path, cli):
    """``1x1:int8``: the application's INT8 build is profiled, and so is the network's,
    each instance's time found again in the quantized graph."""
    app = cnn(tmp_path / "cnn.onnx", width=16)
    refs = "1x1,4x1,1x1:int8"
    out = cli("synth", "profile", app, "--reference", refs, "--timings", "1", "-o", str(tmp_path / "w.json"))
    assert out.returncode == 0, out.stderr[-3000:]
    w = json.loads((tmp_path / "w.json").read_text())
    assert [r["build"] for r in w["references"]] == ["fp32", "fp32", "int8"] and "b1/1t int8" in out.stdout
    # Timed on each reference in a bench process, the INT8 one on its build: so it said.
    assert len(w["applications"][0]["timed_ms"]) == 3 and "time the applications in 1 processes" in out.stderr
    assert (tmp_path / "builds" / "cnn.int8.onnx").is_file()
    int8 = w["applications"][0]["classes"][2]
    assert int8.get("quantize / dequantize", 0) > 0 and int8.get("convolution", 0) > 0.3  # QLinearConv
    assert all(n["us"][2] == 0 for n in w["nodes"])  # another graph: no node of the fp32 one
    out = cli(
        "synth",
        "generate",
        str(tmp_path / "w.json"),
        "-o",
        str(tmp_path / "s.onnx"),
        "--clusters",
        "6",
        "--timings",
        "1",
        "--refits",
        "0",
        "--local-refits",
        "1",
        "-q",
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]
    [net] = json.loads((tmp_path / "s.json").read_text())["networks"]  # one application: one network
    assert net["onnx"] == "s.onnx" and net["weight"] == 1
    assert len(net["predicted_divergence"]) == len(net["measured_divergence"]) == 3
    ran = [u for u in net["units"] if u["count"] and u["cls"] == "convolution"]
    assert ran and all(u["cost_us"][2] > 0 for u in ran)  # found in the quantized graph
    # The network's INT8 build is made once, verified, and its second profile runs that
    # file; only a build over its tolerance (not among its builds) is made again for it.
    where = "kind = 'convert' AND model = 's' AND precision = 'int8'"
    made = ResultStore(os.environ["DLBENCH_DB"]).records(where)
    assert len(made) == (1 if net["builds"].get("int8") == "s.int8.onnx" else 2), (net["builds"], made)
    again = cli(
        "synth", "profile", app, "--reference", refs, "--timings", "0", "-o", str(tmp_path / "w2.json")
    )
    [untimed] = json.loads((tmp_path / "w2.json").read_text())["applications"]
    assert "b1/1t int8" in again.stdout and "timed_ms" not in untimed


def test_a_node_the_runtime_named_is_the_unit_s_that_fed_it_not_the_one_before_it():
    """OpenVINO runs independent lanes interleaved, and names the sequences it splits a
    bidirectional LSTM into for itself: the one it ran after a convolution of another
    lane is the LSTM unit's by what fed it, not the convolution's by order."""
    from dlbench.harness.synth.counts import unit_costs

    conv = Unit("Conv", "convolution", (1, 8, 8, 8), (1, 8, 8, 8), 0, 0, {"kernel_shape": [3, 3]})
    lstm = Unit("LSTM", "other", (6, 1, 10), (6, 2, 1, 8), 1, 2, {"hidden_size": 8})
    nodes = [
        {"node": "u1_i0_tile_3", "op": "Tile", "us": 1.0, "at": 0},
        {"node": "u0_i0_conv_7", "op": "Conv", "us": 10.0, "at": 1},
        {"node": "LSTMSequence_41761", "op": "RNNSeq", "us": 50.0, "at": 2, "fed_by": "u1_i0_tile_3"},
        {"node": "u0_i1_conv_9", "op": "Conv", "us": 10.0, "at": 3},
        {"node": "Reorder_41770", "op": "Reorder", "us": 4.0, "at": 4},  # fed by nothing named
    ]
    by_class, _ = unit_costs([conv, lstm], [{"nodes": nodes}], [2, 1])
    assert sum(by_class[0][1].values()) == pytest.approx(51.0), by_class
    assert sum(by_class[0][0].values()) == pytest.approx(24.0 / 2), by_class  # by order: the one before


def test_openvino_s_own_nodes_say_which_layer_fed_them(tmp_path):
    """Every node of OpenVINO's runtime graph made of no source layer (its LSTM sequences,
    their reshapes) records the nearest source layer upstream: for the recurrent lane's
    sequences, a node of that lane's own unit."""
    import re

    from dlbench.harness.profile.runner import ProfileRequest, profile

    conv = Unit(
        "Conv",
        "convolution",
        (1, 8, 8, 8),
        (1, 8, 8, 8),
        0,
        0,
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
    )
    lstm = Unit(
        "LSTM", "other", (6, 1, 10), (6, 2, 1, 8), 1, 2, {"hidden_size": 8, "direction": "bidirectional"}
    )
    path = tmp_path / "n.onnx"
    onnx.save(emit.network([(conv, 3), (lstm, 2)], seed=0), str(path))
    req = ProfileRequest(
        artifact=str(path), backend="openvino", batch_size=1, threads=1, warmup=2, iterations=3
    )
    record = profile(req)
    assert record["status"] == "ok", record.get("error")
    nodes = record["metrics"]["profile"]["nodes"]
    own = [n for n in nodes if not n["source"] and not re.match(r"u\d+_i\d+_", n["node"])]
    assert own and all(n.get("fed_by") for n in own), own
    sequences = [n for n in own if n["node"].startswith("LSTMSequence")]
    assert len(sequences) == 2 * 2, sequences  # two instances, a sequence each way
    assert all(n["fed_by"].startswith("u1_") for n in sequences), sequences


def test_a_reference_on_openvino_fits_the_network_to_that_engine(tmp_path, cli):
    """``1x1@openvino``: the application is profiled and timed on OpenVINO (with the
    workload's -O, kept for generate), and so is each network, each instance's time found
    again in the plugin's runtime graph by the names it kept."""
    app = cnn(tmp_path / "cnn.onnx", width=16)
    refs = "1x1,4x1,1x1@openvino"
    w = tmp_path / "w.json"
    args = ["--reference", refs, "--timings", "1", "-O", "reshape=off", "-o", str(w)]
    out = cli("synth", "profile", app, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    workload = json.loads(w.read_text())
    assert [r["backend"] for r in workload["references"]] == [None, None, "openvino"]
    assert workload["options"] == {"reshape": "off"} and "b1/1t openvino" in out.stdout
    assert "at batch 1, 1 thread, on openvino" in out.stderr
    [entry] = workload["applications"]
    assert len(entry["timed_ms"]) == 3 and entry["classes"][2]["convolution"] > 0.3, entry["classes"]
    assert all(n["us"][2] == 0 for n in workload["nodes"])  # its own fusions: by class only
    stored = ResultStore(os.environ["DLBENCH_DB"]).records("kind = 'profile' AND backend = 'openvino'")
    assert [r["context"]["runtime"]["shapes"] for r in stored] == ["dynamic (-O reshape=off)"]
    args = ["--clusters", "6", "--timings", "1", "--refits", "0", "--local-refits", "1", "-q"]
    out = cli("synth", "generate", str(w), "-o", str(tmp_path / "s.onnx"), *args)
    assert out.returncode in (0, 1), out.stderr[-3000:]
    described = json.loads((tmp_path / "s.json").read_text())
    [net] = described["networks"]
    assert len(net["timed_ms"]) == len(net["measured_divergence"]) == 3 and min(net["timed_ms"]) > 0
    ran = [u for u in net["units"] if u["count"] and u["cls"] == "convolution"]
    assert ran and all(u["cost_us"][2] > 0 for u in ran)  # found in OpenVINO's runtime graph
    # Every profile of the network on OpenVINO ran with the workload's options too.
    shapes = {r["context"]["runtime"]["shapes"] for r in ResultStore(os.environ["DLBENCH_DB"]).records(
        "kind = 'profile' AND backend = 'openvino'"
    )}  # fmt: skip
    assert shapes == {"dynamic (-O reshape=off)"}


def test_applications_of_one_file_name_are_each_built_timed_and_named_as_themselves(tmp_path, cli):
    """Every Hugging Face export is a ``model.onnx``: two in one set share the builds'
    folder, and are all timed after the last build is made.  Each keeps its own build
    (not the second's timed twice) and its own name in the tables."""
    sides = {"big": 32, "small": 8}
    for folder, side in sides.items():
        (tmp_path / folder).mkdir()
        cnn(tmp_path / folder / "model.onnx", width=4 * side // 8, side=side)
    apps = [str(tmp_path / f / "model.onnx") for f in sides]
    w = tmp_path / "w.json"
    out = cli("synth", "profile", *apps, "--reference", "1x1,4x1,1x1:int8", "--timings", "1", "-o", str(w))
    assert out.returncode == 0, out.stderr[-3000:]
    labels = [a["label"] for a in json.loads(w.read_text())["applications"]]
    assert labels == ["big-model", "small-model"] and "| big-model" in out.stdout

    def side_of(path: Path) -> int:
        return onnx.load(str(path)).graph.input[0].type.tensor_type.shape.dim[-1].dim_value

    assert {n: side_of(tmp_path / "builds" / f"{n}-model.int8.onnx") for n in sides} == sides
    # validate's builds, beside the generated networks' in one folder, alike.
    built, left = build_all(apps, ["int8"], tmp_path / "v", lambda _: None)
    assert not left and [side_of(Path(built[a]["int8"])) for a in apps] == list(sides.values())
    # A third file whose own name is a sharer's new one is numbered, and one file twice is one.
    named = distinct_stems([*apps, str(tmp_path / "x" / "big-model.onnx"), apps[0]])
    assert list(named.values()) == ["big-model", "small-model", "big-model-2"]


@pytest.mark.parametrize(
    "args, says",
    [
        (["--builds", "int9"], "--builds int9: no such build"),
        (["--batch-sizes", "0"], "give positive numbers"),
        (["--allocators", "foo"], "--allocator must be one of"),
        (["--backends", "nosuch"], "no such backend"),
        (["--rounds", "0"], "--rounds 0: give at least 1"),
        (["--repeats", "0"], "--repeats 0: give at least 1"),
        (["-O", "nosuch=1"], "option 'nosuch' applies to none of the backends"),
    ],
)
def test_a_bad_matrix_is_refused_before_anything_runs(synthesized, cli_module, args, says):
    d, _, _, _, _ = synthesized
    before = sorted(p.name for p in (d / "net" / "builds").iterdir())
    out = cli_module("synth", "validate", str(d / "net" / "synthetic.json"), *args)
    assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in (d / "net" / "builds").iterdir()) == before


def test_a_zoo_model_is_exported_for_the_profile_and_kept_by_name(tmp_path, cli):
    refs = ["--reference", "1x1,4x1", "--timings", "0"]
    out = cli("synth", "profile", "lenet5", *refs, "-o", str(tmp_path / "w.json"), "-q")
    assert out.returncode == 0, out.stderr[-3000:]
    [app] = json.loads((tmp_path / "w.json").read_text())["applications"]
    assert app["native"] == "lenet5" and app["source"] == "lenet5.onnx"  # beside the workload
    assert (tmp_path / "lenet5.onnx").is_file() and app["classes"][0]["convolution"] > 0


def test_a_failed_profile_cell_fails_the_step_in_one_line_and_writes_nothing(tmp_path, cli):
    app = cnn(tmp_path / "cnn.onnx", width=8, side=16)
    out = cli(
        "synth", "profile", app, "--reference", "1x1,4x1", "--timeout", "0.01", "-o", str(tmp_path / "w.json")
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "failed: " in out.stderr and "timed out" in out.stderr
    assert not (tmp_path / "w.json").exists()
