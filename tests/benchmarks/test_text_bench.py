"""benchmarks/text_bench.py at its smallest size: one rendered page with ground truth in the nzz format, one
recogniser; it prints the machine, then a row for plain Tesseract, GT-line Tesseract and newsbag's transcript."""

import json
import os
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
TESSDATA = Path(os.environ.get("TESSDATA_PREFIX") or TESSDATA)   # where the runner looks
needs_eng = pytest.mark.skipif(not (TESSDATA / "eng.traineddata").is_file(),
                               reason="apt-get install tesseract-ocr-eng (.ci/run installs it)")
ROW = r"[\d.]+"


def _gt(tmp_path):
    """A ground truth in the nzz format of the rendered page of `write_run`."""
    gt = tmp_path / "gt"
    (gt / "annotations").mkdir(parents=True)
    (gt / "images").mkdir()
    lines = text_page(gt / "images" / "p1.png")   # the page of `write_run`
    left, right = lines[:3], lines[3:]
    regions = [{"bbox_xyxy": [30, 20, 560, 90], "label": "text", "order": 0, "text": HEADLINE,
                "lines": [{"bbox_xyxy": [30, 20, 560, 90], "text": HEADLINE}]},
               {"bbox_xyxy": [30, 140, 480, 340], "label": "text", "order": 1, "text": "\n".join(LEFT),
                "lines": [{"bbox_xyxy": b, "text": t} for b, t in zip(left, LEFT)]},
               {"bbox_xyxy": [530, 140, 980, 340], "label": "text", "order": 2, "text": "\n".join(RIGHT),
                "lines": [{"bbox_xyxy": b, "text": t} for b, t in zip(right, RIGHT)]}]
    (gt / "annotations" / "p1.json").write_text(json.dumps(
        {"page_id": "gt1", "image": "images/p1.png", "width": 1000, "height": 520, "regions": regions}))
    return gt


@needs_eng
@pytest.mark.skipif(shutil.which("tesseract") is None, reason="apt-get install tesseract-ocr (.ci/run installs it)")
def test_text_bench_prints_the_three_rows(tmp_path):
    run = write_run(tmp_path)
    gt = _gt(tmp_path)
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


@needs_eng
def test_text_bench_prints_each_recogniser_and_their_vote(tmp_path):
    run = write_run(tmp_path)
    gt = _gt(tmp_path)
    readings = tmp_path / "readings.json"
    env = {"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin", "TESSDATA_PREFIX": str(TESSDATA)}
    command = [sys.executable, str(REPO / "benchmarks" / "text_bench.py"), str(run), "--gt", str(gt), "--model", "eng",
               "--no-baselines", "--gt-lines", "", "--recognizers", "bag/rover", "--vote-lines", "--readings",
               str(readings)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    cell = rf"\| ({ROW}) \| - \| {ROW} \| {ROW} \| - \| {ROW} \| [\d.-]+ \| {ROW} \|"
    names = ["newsbag bag/rover, C variant", "... its member ppocr alone (the same lines)",
             "... its member tesseract alone (the same lines)", "ppocr on the GT line boxes",
             "tesseract on the GT line boxes", "oracle: the better line of each by its GT", "vote rover, weights 1",
             "vote confident, weights 1"]
    cer = {}
    for name in names:
        match = re.search(rf"\| \([cd]\) {re.escape(name)} {cell}", done.stdout)
        assert match, (name, done.stdout)
        cer[name] = float(match.group(1))
    # clean print read line by line is nearly perfect, by each member and by the vote
    assert max(cer.values()) < 0.1, done.stdout
    # the oracle takes the better line of each: never worse than either member
    assert cer[names[5]] <= min(cer[names[3]], cer[names[4]])
    # (c') and (e): tuned on one half; this ground truth has one page, in half A
    assert re.search(r"\| \(c'\) vote tuned on A \([\d.]+ there, in-sample\): (rover|confident), tesseract weight",
                     done.stdout), done.stdout
    assert re.search(r"\| \(e\) vote tuned on A \([\d.]+ there, in-sample\): (rover|confident), tesseract weight",
                     done.stdout), done.stdout
    # the readings are kept: a second call reads no page again
    again = subprocess.run(command[:-5] + ["--recognizers", "", "--vote-lines", "--readings", str(readings)], env=env,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "read the GT lines" not in again.stderr, again.stderr[-2000:]
