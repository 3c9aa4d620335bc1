"""The install lock: complete, applied, and drift reported without importing anything."""

from __future__ import annotations

import re

from dlbench.harness.machine import lock


def test_lock_pins_every_package_the_cpu_extras_require():
    import importlib.metadata as md

    pins = lock.pinned()
    reqs = md.requires("dlbench") or []
    wanted = {
        re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]
        for r in reqs
        if "extra ==" not in r or re.search(r"extra == .(cpu|test).", r)
    }
    missing = {w for w in wanted if lock._canonical(w) not in pins}
    assert not missing, f"not pinned in {lock.LOCK_FILE.name}: {sorted(missing)}"


def test_this_installation_is_the_locked_one():
    """make install applies the lock; a drift here means the suite ran on another stack."""
    assert lock.drift() == []


def test_drift_names_the_package_and_both_versions(tmp_path):
    f = tmp_path / "lock.txt"
    f.write_text("# header\nNumPy==0.0.1\nnot-installed-anywhere==1.0\npsutil == 0.1 ; python_version>'3'\n")
    assert lock.pinned(f) == {"numpy": "0.0.1", "not-installed-anywhere": "1.0", "psutil": "0.1"}
    got = {d["package"]: d for d in lock.drift(f)}
    assert set(got) == {"numpy", "psutil"}
    assert got["numpy"]["lock"] == "0.0.1" and got["numpy"]["installed"] != "0.0.1"


def test_a_local_version_label_is_not_drift(tmp_path):
    import importlib.metadata as md

    torchless = tmp_path / "lock.txt"
    v = md.version("numpy")
    torchless.write_text(f"numpy=={v}+cpu\n")
    assert lock.drift(torchless) == []
