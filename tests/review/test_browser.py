"""The gallery in a real headless Chromium: pages listed, board images loaded, a non-blank screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from review_kit import review_run  # noqa: F401  (fixture)

from newsbag.review.stage import run_review

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (run .ci/browser_setup.sh)"),
]


def chromium(user_dir, *args: str) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={user_dir}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=5000", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture
def gallery(review_run):
    run_review(review_run, ["p1", "p2", "p3"], {"top_n": 20})
    return review_run / "review" / "index.html"


def test_dom_lists_pages_with_loaded_boards(gallery, tmp_path):
    proc = chromium(tmp_path / "profile", "--dump-dom", gallery.as_uri())
    dom = proc.stdout
    cards = re.findall(r'<article class="card" id="page-(\w+)"', dom)
    assert cards == ["p2", "p1"]
    images = re.findall(r'<img class="board"[^>]*>', dom)
    assert len(images) == 2
    for tag in images:
        assert 'data-loaded="true"' in tag, tag
        width = int(re.search(r'data-natural-width="(\d+)"', tag).group(1))
        assert width > 200
    assert re.search(r'<body[^>]*data-images-loaded="2"', dom)
    assert 'id="shown" class="muted">2 of 2 shown<' in dom  # the filter/sort script ran
    assert re.search(r'<tr class="failed-page" data-page="p3">', dom)
    assert "Uncaught" not in proc.stderr


def test_screenshot_shows_boards(gallery, tmp_path):
    shot = tmp_path / "shot.png"
    chromium(tmp_path / "profile", "--window-size=1280,1400", "--hide-scrollbars", f"--screenshot={shot}",
             gallery.as_uri())
    with Image.open(shot) as im:
        arr = np.asarray(im.convert("RGB")).astype(int)
    assert arr.shape[:2] == (1400, 1280)
    assert arr.std() > 20  # not a blank page
    # The boards' red text outlines are on screen, i.e. the images rendered, not just the text.
    red = (arr[..., 0] > 180) & (arr[..., 1] < 80) & (arr[..., 2] < 80)
    assert red.sum() > 200


def test_zoom_link_opens_the_full_board(gallery, tmp_path):
    dom = chromium(tmp_path / "profile", "--dump-dom", gallery.as_uri() + "#zoom=p1").stdout
    overlay = re.search(r'<div id="overlay"[^>]*>', dom).group(0)
    assert "hidden" not in overlay
    big = re.search(r'<img id="overlay-img"[^>]*>', dom).group(0)
    assert 'src="pages/p1/board.png"' in big
    assert re.search(r'<span id="overlay-title">p1</span>', dom)
