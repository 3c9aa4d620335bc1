"""dlbench packaging.

Why the pins look the way they do:

* ``torch==2.13.0`` is installed by the Makefile before this package, because
  that exact version is the CPU build available offline; the extra only states
  the lower bound we tested, so pip never swaps it for a multi-GB CUDA build.
* MindSpore is pinned to 2.8.x.  MindSpore 2.9.0 and 2.10.0 from PyPI have a
  CPU regression in 3x3 convolutions (about 2.8 s instead of 15 ms for batch
  16, 64->64 channels, 56x56), which makes ResNet-50 training ~47x slower
  (82 s/step against 1.74 s on 2.8.0).  Catching that kind of regression is
  what dlbench is for; do not lift the pin until a newer release is measured.
* These are ranges; the exact versions the suite passed with are in
  harness/constraints-cpu.txt, which ``make install`` applies (pip -c).  A
  newer onnxruntime (1.32.0) once changed behaviour under a fresh clone, so
  nothing on the CPU stack floats any more.
* onnx >= 1.23 writes IR version 14 by default and ONNX Runtime 1.31 reads at
  most 13: converters lower the IR version (see converters/), they do not
  rely on an older onnx.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

PYTORCH = ["torch>=2.13.0"]
TENSORFLOW = ["tensorflow>=2.21.0", "tf2onnx>=1.17.0"]
# The upper bound is deliberate: see the module docstring.
MINDSPORE = ["mindspore>=2.8.0,<2.9"]
ONNX = ["onnx>=1.23.0", "onnxruntime>=1.31.0"]
# The CUDA build is another distribution that installs the same onnxruntime package folder:
# on a GPU machine it replaces the onnx extra (both together overwrite each other's files).
ONNX_GPU = ["onnx>=1.23.0", "onnxruntime-gpu>=1.31.0"]
# OpenVINO's CPU plugin reads ONNX files itself.  openvino-telemetry comes with it: only its
# model converter (ovc, convert_model) uses it, which dlbench never calls.
OPENVINO = ["openvino>=2026.0"]
TENSORRT = ["tensorrt>=10.0", "cuda-python>=12.0"]
# Models by name (models.user.hub): timm:, torchvision:, hf:.  PyPI's torchvision is built
# against the CUDA torch, so beside the CPU build its compiled ops do not load; its Python
# models and timm's layers need none of them (models.user.hub_torch.torchvision_importable).
# The lock pins torchvision 0.28.0, the release built for torch 2.13; without the lock, pip
# may take a newer torchvision and, with it, the newer torch it requires.
ECOSYSTEM = ["timm>=1.0.20", "torchvision>=0.28.0", "transformers>=5.0"]
# Reports draw their plots with matplotlib.  The digits data set ships in the package
# (harness/data/digits.npz): no scikit-learn, which every Keras import would pull in.
# soundfile (libsndfile bundled in its wheel) decodes LibriSpeech's FLAC.
REPORT = ["matplotlib>=3.8"]
DATA = ["pillow>=10.0", "soundfile>=0.12"]
# pytest-xdist runs each group on every core (tests/suites.py): most of a test's time
# is one process importing a framework, which one core does alone.
# pycocotools: the reference encoder the COCO mask reader's RLE decoding is tested against.
# ruff and mypy: the lint, format and type checks tests/test_tooling.py runs in the suite.
TEST = ["pytest>=8.0", "pytest-xdist>=3.5", "pycocotools>=2.0.7", "ruff>=0.17", "mypy>=2.0"]
# The documentation site (mkdocs.yml): make docs builds it, and tests/test_docs.py builds it
# in the suite with --strict.  Material is the theme; everything else is mkdocs' own.
DOCS = ["mkdocs>=1.6", "mkdocs-material>=9.5"]
# --with PACKAGE==VERSION makes its overlay environments with uv (harness.cells.envs): a
# self-contained binary wheel, seconds where pip takes minutes to resolve a framework.
ENVS = ["uv>=0.5"]
# --db postgresql://... (harness.store.postgres): psycopg 3 with its bundled libpq, so a
# machine needs no PostgreSQL client library of its own; imported only for such a URL.
POSTGRES = ["psycopg[binary]>=3.1"]
# --executor ray runs cells as tasks on a Ray cluster (harness.executors): Ray's core
# wheel is enough (no dashboard or autoscaler extras); in cpu so CI runs its tests
# against a real cluster.  Imported only with --executor ray.
RAY = ["ray>=2.60.0"]
# Bottom to top: each layer imports only the ones before it (tests/test_layers.py).
LAYERS = ("core", "models", "converters", "harness")
# The one place the version is written (dlbench.__version__ reads the same file).
VERSION = re.search(
    r'__version__ = "([^"]+)"', (Path(__file__).parent / "core" / "version.py").read_text()
).group(1)

setup(
    name="dlbench",
    version=VERSION,
    description="Train, convert and benchmark the same network across frameworks and inference engines",
    python_requires=">=3.10",
    # dlbench/ holds the public API and links to the design card's top-level folders
    # (dlbench/harness -> ../harness, ...): the package is a plain folder tree, which
    # setuptools, mypy and IDEs all read the same way, and a bare `models` or `harness`
    # of another package in the same environment cannot collide with ours.
    packages=["dlbench"]
    + [f"dlbench.{p}" for p in find_packages(include=[f"{t}{s}" for t in LAYERS for s in ("", ".*")])],
    # The lock ships inside the package so `dlbench env` can say where an install differs.
    package_data={"dlbench.harness": ["constraints-cpu.txt"], "dlbench.harness.data": ["digits.npz"]},
    install_requires=["numpy>=1.26", "psutil>=5.9", "rich>=13"],
    extras_require={
        "pytorch": PYTORCH,
        "tensorflow": TENSORFLOW,
        "mindspore": MINDSPORE,
        "onnx": ONNX,
        "onnx-gpu": ONNX_GPU,
        "openvino": OPENVINO,
        "tensorrt": TENSORRT,
        "report": REPORT,
        "data": DATA,
        "envs": ENVS,
        "postgres": POSTGRES,
        "ray": RAY,
        "ecosystem": PYTORCH + ECOSYSTEM,
        "cpu": PYTORCH
        + TENSORFLOW
        + MINDSPORE
        + ONNX
        + OPENVINO
        + REPORT
        + DATA
        + ENVS
        + POSTGRES
        + RAY
        + ECOSYSTEM,
        "test": TEST,
        "docs": DOCS,
    },
    entry_points={"console_scripts": ["dlbench = dlbench.harness.cli:main"]},
)
