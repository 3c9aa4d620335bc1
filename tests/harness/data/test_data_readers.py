"""The data-set readers on tiny files in each real format (core: no framework)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dlbench.core.errors import UserError
from dlbench.harness.data import canonical, imageops, open_dataset, parse
from dlbench.harness.data.base import Dataset
from dlbench.harness.data.formats import DATA_FORMATS, DataFormat, markdown_table
from dlbench.harness.data.textcorpus import IGNORE, pretraining_dict
from dlbench.harness.data.tokenizer import Vocabulary, pad_ids, tokenize
from dlbench.models.registry import InputSpec, ModelSpec, get_model
from tests.utils import ROOT
from tests.utils.datasets import COLOURS, write_aclimdb, write_cifar, write_corpus, write_imagefolder

MINI = get_model("resnet50-mini")  # 3x64x64, 10 classes


IMAGE_INPUTS = (InputSpec("input", (3, 32, 32)),)


def _spec(name="test-img", inputs=IMAGE_INPUTS, classes=10):
    return ModelSpec(
        name=name,
        display_name=name,
        family="test",
        task="t",
        network_type="CNN",
        dataset="t",
        inputs=inputs,
        num_classes=classes,
        default_batch_size=4,
        builders={},
    )


IMG32 = _spec()
TOKENS = _spec("test-lstm", (InputSpec("input", (12,), "int32", int_range=(0, 10)),), 2)
BERT = _spec(
    "test-bert",
    (
        InputSpec("input_ids", (16,), "int32", (0, 64)),
        InputSpec("token_type_ids", (16,), "int32", (0, 2)),
        InputSpec("attention_mask", (16,), "int32", (0, 2)),
    ),
    2,
)


def _opened(data: str, spec: ModelSpec) -> Dataset:
    ds = open_dataset(data, spec)
    ds.prepare()
    return ds


# -- digits ------------------------------------------------------------------------------
def test_digits_are_read_from_the_shipped_file_with_a_fixed_stratified_split():
    ds = _opened("digits", get_model("lenet5"))
    assert ds.split_sizes() == {"train": 1437, "test": 360}
    (x_tr, y_tr), (_x_te, y_te) = ds.arrays["train"], ds.arrays["test"]
    assert x_tr.shape == (1437, 8, 8) and x_tr.dtype == np.float32
    assert 0.0 <= x_tr.min() and x_tr.max() == 1.0  # pixels 0-16, over 16
    # Every class in both splits, in about its share of the whole (stratified 80/20).
    counts = np.bincount(np.concatenate([y_tr, y_te]), minlength=10)
    share = np.bincount(y_te, minlength=10) - 0.2 * counts
    assert counts.sum() == 1797 and np.abs(share).max() <= 1
    # The two index lists split the 1,797 images: none is both trained on and scored.
    from dlbench.harness.data.digits import FILE

    with np.load(FILE) as f:
        train, test = set(f["train_index"].tolist()), set(f["test_index"].tolist())
    assert not train & test and train | test == set(range(1797))
    assert ds.describe()["split_seed"] == 0
    [(x, y)] = list(ds.eval_batches(360, "NCHW"))
    assert x.shape == (360, 1, 32, 32) and (y == y_te).all()


# -- CIFAR-10 -----------------------------------------------------------------------------
def test_cifar_eval_split_is_the_test_file_normalized(tmp_path):
    truth = write_cifar(tmp_path / "c")
    ds = _opened(str(tmp_path / "c"), IMG32)
    assert ds.format == "cifar10" and ds.split_sizes() == {"train": 40, "test": 12}
    batches = list(ds.eval_batches(5, "NCHW"))
    assert [len(y) for _, y in batches] == [5, 5, 2]
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    labels, pixels = truth["test"]
    assert y.tolist() == labels and y.dtype == np.int32
    mean = np.array(imageops.CIFAR_MEAN).reshape(1, 3, 1, 1)
    std = np.array(imageops.CIFAR_STD).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(x, (pixels / 255.0 - mean) / std, atol=1e-5)
    nhwc = np.concatenate([b[0] for b in ds.eval_batches(5, "NHWC")])
    np.testing.assert_array_equal(nhwc, x.transpose(0, 2, 3, 1))


def test_cifar_training_batches_cover_both_files_and_resize_to_the_model(tmp_path):
    write_cifar(tmp_path / "c")
    ds = _opened(f"cifar10:{tmp_path / 'c'}", MINI)
    stream = ds.train_batches(8, seed=3, layout="NHWC")
    seen = [next(stream) for _ in range(10)]  # 40 samples / 8 = 5 per epoch: 2 epochs
    assert all(x.shape == (8, 64, 64, 3) and x.dtype == np.float32 for x, _ in seen)
    labels = np.concatenate([y for _, y in seen[:5]])
    # one epoch holds every record once: file 1 labels (i+1)%10, file 2 (i+2)%10, 20 each
    want = sorted([(i + 1) % 10 for i in range(20)] + [(i + 2) % 10 for i in range(20)])
    assert sorted(labels.tolist()) == want
    assert abs(float(np.concatenate([x for x, _ in seen]).mean())) < 0.5
    again = ds.train_batches(8, seed=3, layout="NHWC")
    np.testing.assert_array_equal(next(again)[0], seen[0][0])  # seeded


def test_cifar_bad_files_are_user_errors(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "data_batch_1.bin").write_bytes(b"x" * 100)
    with pytest.raises(UserError, match="not a whole number of 3073-byte"):
        open_dataset(str(tmp_path / "c"), IMG32)
    write_cifar(tmp_path / "d", test=0)
    ds = open_dataset(str(tmp_path / "d"), IMG32)
    with pytest.raises(UserError, match="no held-out split.*test_batch.bin"):
        ds.require_eval()
    with pytest.raises(UserError, match="1 channels"):
        open_dataset(str(tmp_path / "d"), _spec(inputs=(InputSpec("input", (1, 32, 32)),)))


# -- image folders ------------------------------------------------------------------------
def test_imagefolder_labels_follow_sorted_class_names(tmp_path):
    write_imagefolder(tmp_path / "im", per_class=3)
    ds = _opened(str(tmp_path / "im"), MINI)
    assert ds.format == "imagefolder" and ds.classes == sorted(COLOURS)
    assert ds.split_sizes() == {"train": 9, "val": 9}
    [(x, y)] = list(ds.eval_batches(9, "NCHW"))
    assert x.shape == (9, 3, 64, 64) and y.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # a solid colour survives crop + resize; normalized with ImageNet statistics
    mean, std = np.array(imageops.IMAGENET_MEAN), np.array(imageops.IMAGENET_STD)
    for k, name in enumerate(sorted(COLOURS)):
        want = (np.array(COLOURS[name]) / 255.0 - mean) / std
        np.testing.assert_allclose(x[3 * k].mean(axis=(1, 2)), want, atol=0.1)
    stream = ds.train_batches(4, seed=0, layout="NHWC")
    xs, ys = zip(*(next(stream) for _ in range(4)))
    assert all(b.shape == (4, 64, 64, 3) for b in xs) and set(np.concatenate(ys)) == {0, 1, 2}


def test_imagefolder_flat_layout_has_no_eval_and_class_limit(tmp_path):
    write_imagefolder(tmp_path / "flat", flat=True)
    ds = _opened(f"imagefolder:{tmp_path / 'flat'}", MINI)
    assert ds.split_sizes() == {"train": 9} and ds.eval_split is None
    with pytest.raises(UserError, match="no ROOT/val"):
        ds.require_eval()
    with pytest.raises(UserError, match="3 classes, but test-img has only 2 outputs"):
        open_dataset(str(tmp_path / "flat"), _spec(classes=2))
    (tmp_path / "flat" / "red" / "broken.jpg").write_bytes(b"not a jpeg")
    ds = _opened(str(tmp_path / "flat"), MINI)
    with pytest.raises(UserError, match="cannot decode .*broken.jpg"):
        next(ds.train_batches(10, seed=0, layout="NCHW"))  # every file in one batch


# -- text ---------------------------------------------------------------------------------
def test_tokenizer_and_vocabulary():
    assert tokenize("Great film.<br /><br />Don't_miss IT, 10/10!") == [
        "great",
        "film",
        "don",
        "t",
        "miss",
        "it",
        "10",
        "10",
    ]
    assert tokenize("Café naïve") == ["café", "naïve"]
    vocab = Vocabulary.build([["b", "a", "b"], ["c", "b", "a"]], size=4)
    assert vocab.words == ["[PAD]", "[UNK]", "b", "a"]  # c dropped: size 4
    assert vocab.encode(["a", "c", "b"]) == [3, 1, 2]
    tie = Vocabulary.build([["z", "y"]], size=10)
    assert tie.words[2:] == ["y", "z"]  # ties alphabetical
    np.testing.assert_array_equal(pad_ids([[5, 6, 7], [8]], 2), [[5, 6], [8, 0]])


def test_aclimdb_ids_labels_and_vocabulary(tmp_path):
    write_aclimdb(tmp_path / "aclImdb")
    ds = _opened(str(tmp_path / "aclImdb"), TOKENS)
    assert ds.format == "aclimdb" and ds.split_sizes() == {"train": 8, "test": 8}
    assert ds.vocab.words[:3] == ["[PAD]", "[UNK]", "great"] and len(ds.vocab) == 10
    batches = list(ds.eval_batches(3, "NCHW"))
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    assert x.shape == (8, 12) and x.dtype == np.int32 and x.max() < 10
    assert y.tolist() == [0, 1] * 4  # interleaved, pos = 1, neg = 0
    great = ds.vocab.ids["great"]
    first_pos = x[1]  # "A great film.<br /><br />Great acting, great story!"
    assert (first_pos == great).sum() == 3 and first_pos[-1] == 0  # padded at the end
    assert list(x[1][:3]) == ds.vocab.encode(["a", "great", "film"])
    x2, y2 = next(ds.train_batches(8, seed=0, layout="NCHW"))
    assert sorted(y2.tolist()) == [0] * 4 + [1] * 4
    with pytest.raises(UserError, match="token data, but resnet50-mini"):
        open_dataset(str(tmp_path / "aclImdb"), MINI)


def test_text_corpus_masking_and_next_sentence_pairs(tmp_path):
    write_corpus(tmp_path / "corpus.txt", documents=10, sentences=6)
    ds = _opened(str(tmp_path / "corpus.txt"), BERT)
    assert ds.format == "text" and ds.eval_split == "heldout"
    assert ds.split_sizes() == {"train": 8 * 5, "heldout": 2 * 5}
    vocab = ds.vocab
    assert vocab.words[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    stream = ds.train_batches(32, seed=1, layout="NCHW")
    chosen = masked = kept = swapped = word_positions = 0
    nsp = []
    for _ in range(20):
        inputs, labels = next(stream)
        d = pretraining_dict((inputs, labels))
        ids, tt, am, mlm = (d[k] for k in ("input_ids", "token_type_ids", "attention_mask", "mlm_labels"))
        assert all(a.shape == (32, 16) and a.dtype == np.int32 for a in (ids, tt, am, mlm))
        assert (ids[:, 0] == 2).all() and (am.sum(1) <= 16).all()
        real = am.astype(bool)
        assert ((ids == 0) == ~real).all()
        seps = (ids == 3) & (mlm == IGNORE)
        assert (seps.sum(1) == 2).all()  # [SEP] never masked
        last_real = real.sum(1) - 1
        assert (ids[np.arange(32), last_real] == 3).all()
        assert (tt[~real] == 0).all() and (tt[:, 0] == 0).all()
        assert (tt[np.arange(32), last_real] == 1).all()
        sel = mlm != IGNORE
        assert (sel.sum(1) >= 1).all() and not (sel & ~real).any()
        word_positions += int(am.sum()) - 3 * 32  # all but [CLS] and two [SEP]
        chosen += sel.sum()
        masked += (ids[sel] == 4).sum()
        kept += (ids[sel] == mlm[sel]).sum()
        swapped += ((ids[sel] != 4) & (ids[sel] != mlm[sel])).sum()
        nsp += d["nsp_labels"].tolist()
    assert 0.12 < chosen / word_positions < 0.2
    assert 0.7 < masked / chosen < 0.9 and 0.04 < kept / chosen < 0.17
    assert 0.04 < swapped / chosen < 0.17
    assert 0.35 < np.mean(nsp) < 0.65


def test_text_corpus_next_sentence_is_really_next(tmp_path):
    docs = write_corpus(tmp_path / "c.txt", documents=4, sentences=3)
    sentences = {tuple(tokenize(s)): (d, i) for d, doc in enumerate(docs) for i, s in enumerate(doc)}
    ds = _opened(str(tmp_path / "c.txt"), _spec("b", (InputSpec("input_ids", (40,), "int32", (0, 200)),), 2))
    inv = ds.vocab.words
    for inputs, labels in [next(ds.train_batches(16, seed=s, layout="NCHW")) for s in range(3)]:
        d = pretraining_dict((inputs, labels))
        ids = np.where(d["mlm_labels"] != IGNORE, d["mlm_labels"], d["input_ids"])
        for row, label in zip(ids, d["nsp_labels"]):
            seps = np.flatnonzero(row == 3)
            a = tuple(inv[t] for t in row[1 : seps[0]])
            b = tuple(inv[t] for t in row[seps[0] + 1 : seps[1]])
            (da, ia), (db, ib) = sentences[a], sentences[b]
            assert (label == 0) == (da == db and ib == ia + 1)
    held = list(ds.eval_batches(4, "NCHW"))
    assert sum(len(lab["nsp_labels"]) for _, lab in held) == 2 * 2
    again = list(ds.eval_batches(4, "NCHW"))
    np.testing.assert_array_equal(held[0][0]["input_ids"], again[0][0]["input_ids"])


def test_text_corpus_needs_documents(tmp_path):
    (tmp_path / "one.txt").write_text("just one sentence\nand another\n")
    ds = open_dataset(str(tmp_path / "one.txt"), BERT)
    with pytest.raises(UserError, match="at least two documents"):
        ds.prepare()


# -- digits, npz, synthetic, dispatch --------------------------------------------------------
def test_digits_split_and_upsampling():
    ds = _opened("digits", MINI)
    assert ds.split_sizes() == {"train": 1437, "test": 360}
    y = np.concatenate([b[1] for b in ds.eval_batches(100, "NCHW")])
    assert len(y) == 360 and np.bincount(y).min() >= 35  # stratified: ~36 per class
    x, y = next(ds.train_batches(16, seed=0, layout="NHWC"))
    assert x.shape == (16, 64, 64, 3) and x.dtype == np.float32
    np.testing.assert_array_equal(x[..., 0], x[..., 2])  # grey repeated over channels
    one = _opened("digits", _spec(inputs=(InputSpec("input", (1, 8, 8)),)))
    xa, _ = next(one.eval_batches(400, "NCHW"))
    assert xa.shape == (360, 1, 8, 8) and abs(float(xa.mean())) < 0.1


def test_npz_reader_keeps_working(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(
        tmp_path / "d.npz",
        x=rng.standard_normal((10, 3, 32, 32)),
        y=np.arange(10) % 10,
        x_test=np.zeros((3, 3, 32, 32)),
        y_test=np.array([1, 2, 3]),
    )
    ds = _opened(str(tmp_path / "d.npz"), IMG32)
    assert ds.split_sizes() == {"train": 10, "test": 3} and ds.eval_split == "test"
    x, y = next(ds.train_batches(4, seed=0, layout="NHWC"))
    assert x.shape == (4, 32, 32, 3) and x.dtype == np.float32 and y.dtype == np.int32
    assert [b[1].tolist() for b in ds.eval_batches(2, "NCHW")] == [[1, 2], [3]]


def test_synthetic_heldout_split_is_new_samples():
    ds = _opened("synthetic", IMG32)
    pool = ds.pool(4, 3, seed=0, layout="NCHW")
    held = list(ds.eval_batches(4, "NCHW", limit=10))
    assert [len(y) for _, y in held] == [4, 4, 2]
    assert not any(np.array_equal(h[0], p[0]) for h in held for p in pool)


def test_format_detection_and_bad_paths(tmp_path):
    write_cifar(tmp_path / "c")
    write_aclimdb(tmp_path / "imdb")
    write_imagefolder(tmp_path / "im")
    (tmp_path / "t.txt").write_text("a\n")
    assert parse(str(tmp_path / "c"))[0] == "cifar10"
    assert parse(str(tmp_path / "imdb"))[0] == "aclimdb"
    assert parse(str(tmp_path / "im"))[0] == "imagefolder"
    assert parse(str(tmp_path / "t.txt"))[0] == "text"
    assert parse("digits") == ("digits", None)
    assert canonical(f"cifar10:{tmp_path / 'c'}") == f"cifar10:{(tmp_path / 'c').resolve()}"
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="format not recognized"):
        parse(str(tmp_path / "empty"))
    with pytest.raises(UserError, match="no such file or directory"):
        parse(str(tmp_path / "missing"))
    with pytest.raises(UserError, match="no such file or directory"):
        open_dataset(f"cifar10:{tmp_path / 'missing'}", IMG32)
    with pytest.raises(UserError, match="no data_batch"):
        open_dataset(f"cifar10:{tmp_path / 'im'}", IMG32)
    with pytest.raises(UserError, match="fewer than one batch"):
        next(open_dataset(str(tmp_path / "c"), IMG32).train_batches(64, 0, "NCHW"))


def test_resize_matches_pillow_bilinear_upsampling():
    from PIL import Image

    img = np.random.default_rng(0).random((8, 8)).astype(np.float32)
    ours = imageops.resize(img[None, None], 16, 16)[0, 0]
    pil = np.asarray(Image.fromarray(img, mode="F").resize((16, 16), Image.BILINEAR))
    np.testing.assert_allclose(ours, pil, atol=1e-5)


# -- the declarations --------------------------------------------------------------------
DATA_PAGE = ROOT / "docs" / "reference" / "data-formats.md"


def test_the_docs_table_is_the_one_the_declarations_render():
    """The README once listed six formats while the code read ten: the docs' page now
    names the generated block, which the site build fills with ``markdown_table()``."""
    from dlbench.harness.docs import expand

    assert "<!-- dlbench:data-formats -->" in DATA_PAGE.read_text()
    assert markdown_table() in expand(DATA_PAGE.read_text())


def test_every_declared_format_names_a_reader_of_that_format(tmp_path):
    for fmt in DATA_FORMATS.all(hidden=True):
        reader = fmt.reader_class()
        assert issubclass(reader, Dataset) and reader.format == fmt.name, fmt
        assert fmt.recognizes(tmp_path) is False, fmt  # an empty directory: none
        assert fmt.named == (fmt.recognizer is None) and bool(fmt.recognized) != fmt.named, fmt
        assert "\n" not in fmt.description + fmt.recognized, fmt


class _Fake(Dataset):
    format = "fake-test-format"

    def split_sizes(self):
        return {"train": 1}

    def train_batches(self, batch_size, seed, layout):
        raise NotImplementedError

    def eval_batches(self, batch_size, layout, limit=None):
        raise NotImplementedError


def _looks_fake(path: Path) -> bool:
    return path.suffix == ".fake"


def _train_help(capsys) -> str:
    from dlbench.harness.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_a_format_declared_from_outside_is_listed_and_read(tmp_path, capsys):
    """What a plugin does (``DLBENCH_PLUGINS``): one declaration, no edit of dlbench."""
    name = _Fake.format
    DATA_FORMATS.register(
        name,
        DataFormat(
            name,
            "one `.fake` file",
            f"{__name__}:_Fake",
            recognizer=f"{__name__}:_looks_fake",
            recognized="a `.fake` file",
        ),
    )
    try:
        (tmp_path / "x.fake").write_text("")
        assert f"{name} (a .fake file)" in _train_help(capsys)
        assert name in markdown_table()
        assert parse(str(tmp_path / "x.fake")) == (name, tmp_path / "x.fake")
        ds = open_dataset(f"{name}:{tmp_path / 'x.fake'}", IMG32)
        assert isinstance(ds, _Fake) and ds.path == tmp_path / "x.fake"
        with pytest.raises(UserError, match=r"a \.fake file \(fake-test-format\)"):
            parse(str(tmp_path))  # the refusal lists it among the wanted
    finally:
        DATA_FORMATS.unregister(name)
    assert name not in _train_help(capsys)
    with pytest.raises(UserError, match="no such file"):  # no longer a FORMAT: prefix
        parse(f"{name}:{tmp_path}")
