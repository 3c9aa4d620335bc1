"""Recognizing a user's model file from its content, without importing any framework."""

import zipfile

import pytest

from dlbench.core.errors import UserError
from dlbench.models.user import from_code, sniff, what_is


def _zip(path, names):
    with zipfile.ZipFile(path, "w") as z:
        for n in names:
            z.writestr(n, b"x")
    return path


def test_formats_are_told_by_content_not_suffix(tmp_path):
    ts = _zip(tmp_path / "model.bin", ["m/data.pkl", "m/code/__torch__.py", "m/constants.pkl"])
    ep = _zip(tmp_path / "a.pt", ["a/archive_format", "a/models/model.json", "a/byteorder"])
    ks = _zip(tmp_path / "k.zip", ["config.json", "metadata.json", "model.weights.h5"])
    sm = tmp_path / "exported"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(b"\x08\x01")
    assert (sniff(ts).kind, sniff(ts).framework) == ("torchscript", "pytorch")
    assert (sniff(ep).kind, sniff(ep).framework) == ("torch-export", "pytorch")
    assert (sniff(ks).kind, sniff(ks).framework) == ("keras", "tensorflow")
    assert (sniff(sm).kind, sniff(sm).framework) == ("savedmodel", "tensorflow")
    assert sniff(ts).name == "model" and sniff(sm).name == "exported"


def test_what_is_not_a_model_says_what_it_is(tmp_path):
    sd = _zip(tmp_path / "sd.pt", ["sd/data.pkl", "sd/data/0", "sd/version"])
    assert sniff(sd) is None
    assert "torch.save pickle" in what_is(sd) and "--model-from" in what_is(sd)
    other = _zip(tmp_path / "o.zip", ["readme.txt"])
    assert sniff(other) is None and "zip archive (1 entries)" in what_is(other)
    empty = tmp_path / "e.pt"
    empty.write_bytes(b"")
    assert sniff(empty) is None and what_is(empty) == "an empty file"
    py = tmp_path / "net.py"
    py.write_text("x = 1\n")
    assert f"--model-from {py}:CALLABLE" in what_is(py)
    assert "without saved_model.pb" in what_is(tmp_path)


def test_model_from_is_checked_for_form_before_any_import(tmp_path):
    assert from_code("pkg.mod:build").model_from == "pkg.mod:build"
    f = tmp_path / "net.py"
    f.write_text("def build(): pass\n")
    assert from_code(f"{f}:build").model_from == f"{f}:build"
    for bad, needle in (
        ("nocolon", "MODULE:CALLABLE"),
        ("mod:", "MODULE:CALLABLE"),
        (f"{tmp_path}/missing.py:net", "no such file"),
        ("not a/module:net", "neither a module name"),
    ):
        with pytest.raises(UserError, match=needle):
            from_code(bad)
    with pytest.raises(UserError, match="--weights"):
        from_code("pkg.mod:build", str(tmp_path / "nope.pt"))
