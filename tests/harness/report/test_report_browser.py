"""The HTML report in a real browser (headless Chromium), offline: it renders, and every
chart is an image the browser decoded (the page's inline script counts them on load)."""

from __future__ import annotations

import io
import os
import re
import subprocess

import pytest

from tests.utils.clitools import run_cli

CHROMIUM = "/usr/bin/chromium"  # tests/conftest.py skips these tests where it is missing

pytestmark = pytest.mark.browser

MODEL = "resnet50-mini"


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    """A report over real records: a short training run, its ONNX export, a batch sweep."""
    tmp = tmp_path_factory.mktemp("browser")
    db, out = tmp / "results.sqlite", tmp / "runs"

    def cli(*args):
        res = run_cli(*args, env={"DLBENCH_DB": db})
        assert res.returncode == 0, (args, res.stderr[-3000:])

    cli(
        "train",
        MODEL,
        "--framework",
        "pytorch",
        "--steps",
        "2",
        "--warmup-steps",
        "1",
        "--batch-size",
        "4",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    cli("export", str(out / MODEL / "pytorch"))
    cli(
        "bench",
        str(out / MODEL / "pytorch" / "model.onnx"),
        "-b",
        "onnxruntime",
        "--batch-sizes",
        "1,2",
        "--threads",
        "1",
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--max-warmup",
        "2",
        "--no-progress",
    )
    cli("report", "--out", str(tmp / "report.html"))
    return tmp / "report.html"


def _chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    """Headless, sandbox off (containers), and nothing that would reach the network."""
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ, HOME=str(tmp_path)),
    )


def test_browser_decodes_every_chart(report_html, tmp_path):
    charts = report_html.read_text().count('<img alt="')
    assert charts == 4
    res = _chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", report_html.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    body = re.search(r"<body([^>]*)>", res.stdout)
    assert body, res.stdout[:2000]
    attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', body.group(1)))
    assert attrs.get("data-images-total") == str(charts), attrs
    assert attrs.get("data-images-decoded") == str(charts), attrs
    for title in ("Training", "Inference", "Conversion", "Charts"):
        assert f"<h2>{title}</h2>" in res.stdout


def test_screenshot_is_a_rendered_page(report_html, tmp_path):
    from PIL import Image

    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path, "--window-size=1280,2000", f"--screenshot={shot}", report_html.as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    img = Image.open(io.BytesIO(shot.read_bytes()))
    assert img.format == "PNG" and img.size == (1280, 2000)
    grey = img.convert("L")
    hist = grey.histogram()
    dark = sum(hist[:128]) / (img.size[0] * img.size[1])
    assert 0.005 < dark < 0.5, f"{dark:.2%} of the page is dark: blank or black page"
    assert len([n for n in hist if n]) > 50, "a rendered page has text and charts, not one tone"
    # the first chart sits below the tables: the lower half of the page is not empty either
    lower = grey.crop((0, 1000, 1280, 2000)).histogram()
    assert sum(lower[:200]) > 1000
