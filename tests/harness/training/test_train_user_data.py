"""Training data in a user's model's signature (harness.data.signature), and the training
requests refused before any framework loads (issue 18)."""

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.data import open_dataset
from dlbench.harness.training.user import from_dict, to_dict
from dlbench.models.registry import USER_FAMILY, InputSpec, ModelSpec
from tests.utils import tiny_onnx
from tests.utils.clitools import assert_usage_error


def user_spec(objective="classification", label_shape=(), classes=5, fills=None):
    fills = fills or [
        {"name": "image", "fill": "normal"},
        {"name": "ids", "fill": "uniform", "range": [3, 9]},
        {"name": "sr", "fill": "value", "value": 7},
    ]
    return ModelSpec(
        name="mine",
        display_name="mine",
        family=USER_FAMILY,
        task=objective,
        network_type="user model",
        dataset="synthetic",
        inputs=(
            InputSpec("image", (2, 4, 4)),
            InputSpec("ids", (6,), "int64", (3, 9)),
            InputSpec("sr", (1,), "int32"),
        ),
        num_classes=classes,
        default_batch_size=8,
        builders={"pytorch": "x:y"},
        config={"user": {"fills": fills, "label_shape": list(label_shape), "output": "o"}},
        objective=objective,
    )


def test_synthetic_batches_follow_the_signature_and_are_learnable():
    spec = user_spec(label_shape=(3,))
    ds = open_dataset("synthetic", spec)
    batches = ds.pool(8, 4, seed=1, layout="NCHW")
    (image, ids, sr), y = batches[0]
    assert image.shape == (8, 2, 4, 4) and image.dtype == np.float32
    assert ids.dtype == np.int64 and ids.min() >= 3 and ids.max() < 9
    assert (sr == 7).all() and sr.dtype == np.int32
    assert y.shape == (8, 3) and y.dtype == np.int32 and (y == y[:, :1]).all()
    # The label is a function of the image: same class, same pattern under the noise.
    flat = np.concatenate([b[0][0] for b in batches]).reshape(32, -1)
    labels = np.concatenate([b[1][:, 0] for b in batches])
    c = labels[0]
    same, other = flat[labels == c], flat[labels != c]
    assert np.corrcoef(same[0], same[-1])[0, 1] > np.corrcoef(same[0], other[0])[0, 1]
    again = open_dataset("synthetic", spec).pool(8, 4, seed=1, layout="NCHW")
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(batches, again))


def test_regression_targets_have_the_output_shape_and_follow_the_class():
    spec = user_spec("regression", label_shape=(2,), classes=0)
    ((x, y),) = open_dataset("synthetic", spec).pool(64, 1, seed=0, layout="NCHW")
    assert y.shape == (64, 2) and y.dtype == np.float32
    assert len(np.unique(y, axis=0)) <= 16  # one fixed target per active class


def test_npz_data_named_like_the_inputs(tmp_path):
    spec = user_spec()
    rng = np.random.default_rng(0)
    arrays = dict(
        image=rng.standard_normal((10, 2, 4, 4)).astype(np.float32),
        ids=rng.integers(3, 9, (10, 6)),
        sr=np.full((10, 1), 7),
        y=rng.integers(0, 5, 10),
    )
    np.savez(tmp_path / "ok.npz", **arrays)
    ds = open_dataset(str(tmp_path / "ok.npz"), spec)
    (image, ids, sr), y = next(ds.train_batches(4, 0, "NCHW"))
    assert image.shape == (4, 2, 4, 4) and ids.dtype == np.int64 and sr.dtype == np.int32
    assert y.dtype == np.int32 and ds.split_sizes() == {"train": 10}

    np.savez(tmp_path / "wrong.npz", **{**arrays, "ids": np.zeros((10, 5), np.int64)})
    with pytest.raises(UserError, match=r"ids has shape \(10, 5\).*'ids' needs \(10, 6\)"):
        open_dataset(str(tmp_path / "wrong.npz"), spec)
    np.savez(tmp_path / "classes.npz", **{**arrays, "y": np.full(10, 5)})
    with pytest.raises(UserError, match=r"classes in \[0, 5\)"):
        open_dataset(str(tmp_path / "classes.npz"), spec)
    np.savez(tmp_path / "missing.npz", **{k: v for k, v in arrays.items() if k != "sr"})
    with pytest.raises(UserError, match="needs arrays image, ids, sr and y"):
        open_dataset(str(tmp_path / "missing.npz"), spec)
    with pytest.raises(UserError, match="synthetic data or an .npz"):
        open_dataset("digits", spec)


def test_the_spec_travels_to_the_cell_unchanged():
    spec = user_spec(label_shape=(3,))
    assert from_dict(to_dict(spec)) == spec


def test_training_requests_refused_before_any_framework_loads(cli, workdir):
    onnx_path = tiny_onnx.save(tiny_onnx.classifier(), workdir / "c.onnx")
    assert_usage_error(
        cli("train", onnx_path, "--objective", "classification"), "trains a framework's own model", "not onnx"
    )
    assert_usage_error(cli("train", "--model-from", "somewhere:net"), "needs --objective")
    assert_usage_error(
        cli("train", "lenet5", "--shape", "x=1x2"),
        "--shape is for a model of your own",
        "lenet5 is a zoo model",
    )
    assert_usage_error(
        cli("train", "lenet5", "--objective", "regression"), "lenet5 trains for classification"
    )
    assert_usage_error(
        cli("train", "nets/mine.pt", "--objective", "regression"),
        "nets/mine.pt: no such file or directory, and not a zoo model",
    )
    assert_usage_error(cli("train"), "give a zoo model name, a model file, or --model-from")
    assert not (workdir / "runs").exists()


def test_held_out_scores_for_per_position_classes_and_regression():
    from dlbench.harness.evaluate.scoring import tally_for

    t = tally_for("classification")
    logits = np.zeros((2, 3, 4))
    logits[..., 1] = 5.0  # class 1 everywhere
    t.add((logits,), np.array([[1, 1, 0], [1, 2, 1]]))
    r = t.result()
    assert r["samples"] == 6 and r["correct"] == 4  # one score per position

    t = tally_for("regression")
    t.add((np.array([[1.0, 2.0], [0.0, 0.0]]),), np.array([[1.0, 0.0], [0.0, 1.0]]))
    r = t.result()
    assert r["loss"] == pytest.approx(5.0 / 4) and r["accuracy"] is None and r["samples"] == 2
    with pytest.raises(ValueError, match="targets"):
        t.add((np.zeros((2, 2)),), np.zeros((2, 3)))
