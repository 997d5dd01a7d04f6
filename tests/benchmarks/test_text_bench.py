"""benchmarks/text_bench.py at its smallest size: one rendered page with ground truth in the nzz format, one
recogniser; it prints the machine, then a row for plain Tesseract, GT-line Tesseract and newsbag's transcript."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nbtest import REPO

sys.path.insert(0, str(REPO / "tests" / "transcription"))
from stage_kit import HEADLINE, LEFT, RIGHT, text_page, write_run  # noqa: E402

pytest.importorskip("tesserocr")
TESSDATA = Path("/usr/share/tesseract-ocr/5/tessdata")
pytestmark = pytest.mark.skipif(shutil.which("tesseract") is None or not (TESSDATA / "eng.traineddata").is_file(),
                                reason="apt-get install tesseract-ocr-eng (.ci/run installs it)")
ROW = r"[\d.]+"


def test_text_bench_prints_the_three_rows(tmp_path):
    run = write_run(tmp_path)
    gt = tmp_path / "gt"
    (gt / "annotations").mkdir(parents=True)
    lines = text_page(tmp_path / "p1.png")
    (gt / "images").mkdir()
    shutil.copy(run / "img" / "p1.png", gt / "images" / "p1.png")
    left, right = lines[:3], lines[3:]
    regions = [{"bbox_xyxy": [30, 20, 560, 90], "label": "text", "order": 0, "text": HEADLINE,
                "lines": [{"bbox_xyxy": [30, 20, 560, 90], "text": HEADLINE}]},
               {"bbox_xyxy": [30, 140, 480, 340], "label": "text", "order": 1, "text": "\n".join(LEFT),
                "lines": [{"bbox_xyxy": b, "text": t} for b, t in zip(left, LEFT)]},
               {"bbox_xyxy": [530, 140, 980, 340], "label": "text", "order": 2, "text": "\n".join(RIGHT),
                "lines": [{"bbox_xyxy": b, "text": t} for b, t in zip(right, RIGHT)]}]
    (gt / "annotations" / "p1.json").write_text(json.dumps(
        {"page_id": "gt1", "image": "images/p1.png", "width": 1000, "height": 520, "regions": regions}))
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "text_bench.py"), str(run), "--gt", str(gt),
                           "--model", "eng", "--recognizers", "recognize_tesseract"],
                          env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("# machine: ")
    assert "1 pages (1 in half A): gt1" in done.stdout
    cer = {}
    for key, name in (("a", r"tesseract -l eng, its own layout"), ("b", r"Tesseract eng on the GT line boxes"),
                      ("c", r"newsbag recognize_tesseract, C variant")):
        match = re.search(rf"\| \({key}\) {name} \| ({ROW}) \| - \| {ROW} \| {ROW} \| - \| {ROW} \| [\d.-]+ \| {ROW} \|",
                          done.stdout)
        assert match, done.stdout
        cer[key] = float(match.group(1))
    # clean print read line by line is nearly perfect; Tesseract's own layout may run across the columns
    assert cer["b"] < 0.1 and cer["c"] < 0.1, done.stdout
