"""Shared fixtures and the hardware/framework markers.

``gpu`` and ``ascend`` tests skip with the reason where the hardware is
absent.  ``pytorch``/``tensorflow``/``mindspore`` mark tests that import that
framework into the test process; tests/suites.py runs each group in its own
process, and the core group fails if anything imported a framework.
"""

from __future__ import annotations

import os
import sys

import pytest

from dlbench.harness.machine.fingerprint import fingerprint

if os.environ.get("DLBENCH_TEST_GROUP") == "mindspore":
    # MindSpore's generated protobuf modules fail to load ("Descriptors cannot be
    # created directly") once onnx and onnxruntime have loaded protobuf first, as
    # collecting the other test modules does; loaded first, all three coexist.
    # Any process that needs MindSpore and ONNX together must load MindSpore first.
    os.environ.setdefault("GLOG_v", "3")
    import mindspore  # noqa: F401 - loaded before onnx and onnxruntime (above)

HEAVY = ("torch", "tensorflow", "mindspore", "tensorrt")


def _pin_xdist_worker() -> None:
    """Give each pytest-xdist worker its own share of the CPUs.  dlbench's cells default
    to the cores they may use, so two workers that both saw every core ran two threads a
    cell on two shared cores: spinning OpenMP and ONNX Runtime barriers then made cells
    up to 28x slower (a one-device LeNet cell: 54 s against 8 s), which timed cells out
    and made the core group most of the suite's time."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not (worker and count and hasattr(os, "sched_setaffinity")):
        return
    cpus = sorted(os.sched_getaffinity(0))
    index, share = int(worker.removeprefix("gw")), len(cpus) // int(count)
    if share:
        os.sched_setaffinity(0, cpus[index * share : (index + 1) * share])


_pin_xdist_worker()
FRAMEWORK_GROUPS = ("pytorch", "tensorflow", "mindspore")
CHROMIUM = "/usr/bin/chromium"  # what `browser`-marked tests drive (headless)


def pytest_ignore_collect(collection_path, config):
    """Under tests/suites.py, ``test_*_<framework>.py`` files are collected only in
    their framework's group: collecting imports the module, and with it the framework."""
    group = os.environ.get("DLBENCH_TEST_GROUP")
    owner = _owner(collection_path.stem)
    if group and owner and owner != group:
        return True
    return None


def _owner(stem: str) -> str | None:
    """The framework group a test file belongs to by its name (and gets the marker of)."""
    if stem.startswith("test_"):
        return next((fw for fw in FRAMEWORK_GROUPS if stem.endswith("_" + fw)), None)
    return None


def pytest_collection_modifyitems(config, items):
    fp = fingerprint()
    no_gpu = pytest.mark.skip(reason="no NVIDIA GPU on this machine (nvidia-smi found none)")
    no_npu = pytest.mark.skip(reason="no Ascend NPU on this machine (no /dev/davinci*)")
    no_browser = pytest.mark.skip(
        reason=f"headless Chromium not installed ({CHROMIUM} missing; make test installs it)"
    )
    for item in items:
        owner = _owner(item.path.stem)
        if owner:
            item.add_marker(getattr(pytest.mark, owner))
        if item.get_closest_marker("gpu") and not fp["gpus"]:
            item.add_marker(no_gpu)
        if item.get_closest_marker("ascend") and not fp["ascend"]:
            item.add_marker(no_npu)
        if item.get_closest_marker("browser") and not os.access(CHROMIUM, os.X_OK):
            item.add_marker(no_browser)


@pytest.fixture(autouse=True)
def _core_imports_no_framework():
    """In the core group, the test that pulls a framework into the process fails by name.

    Checked around each test rather than once at the end, because under
    pytest-xdist a worker's end-of-session status does not reach the run's.
    """
    if os.environ.get("DLBENCH_TEST_GROUP") != "core":
        yield
        return
    before = {m for m in HEAVY if m in sys.modules}
    if before:
        pytest.fail(
            f"{', '.join(sorted(before))} was imported while the core group was "
            f"collected: a test module imports it at its top",
            pytrace=False,
        )
    yield
    leaked = [m for m in HEAVY if m in sys.modules and m not in before]
    if leaked:
        pytest.fail(
            f"this core-group test imported {', '.join(leaked)} in-process: mark it "
            f"with the framework's marker",
            pytrace=False,
        )


@pytest.fixture(scope="session", autouse=True)
def _unnamed_results_db(tmp_path_factory):
    """The results database of whatever names none, module fixtures included: a test that
    forgot to (the synth int8 test, through the CLI's default) wrote its records into the
    checkout's results/dlbench.sqlite, where any later run reading that default found them."""
    if "DLBENCH_DB" in os.environ:  # the caller's own choice
        yield None
        return
    path = str(tmp_path_factory.mktemp("unnamed-db") / "results.sqlite")
    os.environ["DLBENCH_DB"] = path
    yield path
    os.environ.pop("DLBENCH_DB", None)


@pytest.fixture(autouse=True)
def _private_results_db(_unnamed_results_db, tmp_path_factory, monkeypatch):
    """...and each test one of its own, apart from ``tmp_path`` (whose contents some tests
    list), so that no test reads another's records through the default."""
    if _unnamed_results_db is not None and os.environ.get("DLBENCH_DB") == _unnamed_results_db:
        monkeypatch.setenv("DLBENCH_DB", str(tmp_path_factory.mktemp("db") / "results.sqlite"))


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run in a scratch directory with a private results database."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DLBENCH_DB", str(tmp_path / "results.sqlite"))
    return tmp_path


@pytest.fixture
def cli():
    """The real CLI as a user runs it (``tests.utils.clitools.run_cli``: in this process
    unless ``process=True`` asks for one of its own)."""
    from tests.utils.clitools import run_cli

    return run_cli
