"""Training objectives as declarations (harness.training.objectives; core: no framework)."""

from __future__ import annotations

import pytest

from dlbench.core.errors import UserError
from dlbench.harness.training import objectives
from dlbench.harness.training.objectives import (
    FRAMEWORKS,
    OBJECTIVES,
    Objective,
    label_dtype,
    user_objectives,
)
from dlbench.models import registry as models
from tests.utils import ROOT


def test_the_declarations_cover_the_model_layer_s_objectives():
    """The model layer keeps its own table (each objective's head) and cannot import this
    one: the two must name the same objectives."""
    assert set(OBJECTIVES.names()) == set(models.OBJECTIVES)


def test_every_objective_names_a_loss_in_every_framework_by_a_module_that_exists():
    for o in OBJECTIVES.all():
        assert set(o.losses) == set(FRAMEWORKS), o.name
        for target in o.losses.values():
            module, _, attribute = target.partition(":")
            path = ROOT.joinpath(*module.removeprefix("dlbench.").split("."))
            assert attribute and path.with_suffix(".py").is_file(), target


def test_labels_and_their_dtypes_and_the_old_tables_read_from_the_declarations():
    assert objectives.LABELS["ctc"] == ("transcripts", "transcript_lengths", "output_frames")
    assert objectives.LABELS["classification"] is None
    assert objectives.LOSSES["ctr"] == objectives.LOSSES["classification"]
    assert label_dtype("regression", "int64") == "float32"
    assert label_dtype("classification", "int64") == "int64"
    with pytest.raises(UserError, match="unknown objective 'nope'"):
        label_dtype("nope", "int32")


def _train_help(capsys) -> str:
    from dlbench.harness.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_objective_choices_for_a_model_of_your_own_come_from_the_declarations(capsys):
    assert user_objectives() == ("classification", "regression")
    OBJECTIVES.register(
        "test-ranking",
        Objective("test-ranking", "pairwise hinge on scores", {"pytorch": "mine:hinge"}, user=True),
    )
    try:
        assert "--objective {classification,regression,test-ranking}" in _train_help(capsys)
        assert "test-ranking: pairwise hinge on scores" in _train_help(capsys)
        with pytest.raises(UserError, match="has no tensorflow loss"):
            objectives.loss_for("test-ranking", "tensorflow")
    finally:
        OBJECTIVES.unregister("test-ranking")
    assert "test-ranking" not in _train_help(capsys)
