"""`newsbag run` end to end on the embedded default bag: real models, two real (downscaled) pages."""

import csv
import json
from pathlib import Path

import pytest
from PIL import Image

from newsbag.cli import main

from nbtest import EXAMPLE_PAGE, shared_path

SOURCES = {"tesseract/blocks", "tesseract/paragraphs", "paddle_layout/cdla", "text_lines/lines", "text_lines/blocks"}


def run_cli(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return exc.value.code, *capsys.readouterr()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("inputs")
    sample = EXAMPLE_PAGE
    nzz = shared_path("eval", "nzz", "images", "0002_nzz_17810901_0_0_a1_p1_1.tif")
    for src, rel, scale in ((sample, "us/front.png", 0.8), (nzz, "nzz/p1.tif", 0.5)):
        with Image.open(src) as im:
            out = root / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            im.resize((int(im.width * scale), int(im.height * scale))).save(out)
    return root


def read_tsv(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_embedded_default_run_end_to_end(inputs, tmp_path, capsys):
    run = tmp_path / "run"
    code, out, err = run_cli(capsys, "run", "--input-dir", inputs, "--recursive", "--run-dir", run)
    assert code == 0, err
    assert out == "" and "2 page(s): 2 ok, 0 failed, 0 skipped" in err and "recommended: " in err
    page_ids = [json.loads(line)["page_id"] for line in (run / "manifests/pages.jsonl").read_text().splitlines()]
    assert len(page_ids) == 2
    for source in SOURCES:
        for page_id in page_ids:
            page = json.loads((run / "outputs/sources" / source / f"{page_id}.json").read_text())
            assert page["source"]["device"] == "cpu"
            assert all(0 <= r["bbox_xyxy"][0] < r["bbox_xyxy"][2] <= page["image"]["width"] for r in page["regions"])
    lines = json.loads((run / "outputs/sources/text_lines/lines" / f"{page_ids[0]}.json").read_text())
    assert len(lines["regions"]) > 50 and {r["class"] for r in lines["regions"]} == {"text_line"}
    blocks = json.loads((run / "outputs/sources/tesseract/blocks" / f"{page_ids[0]}.json").read_text())
    assert sum(r["class"] == "text" for r in blocks["regions"]) >= 3

    fusion = run / "outputs/fusion"
    summary = json.loads((fusion / "summary.json").read_text())
    assert summary["recommended_variant"]
    sources = {row["name"] for row in read_tsv(fusion / "source_leaderboard.tsv")}
    assert sources == SOURCES
    variants = read_tsv(fusion / "variant_leaderboard.tsv")
    assert summary["recommended_variant"] in {row["name"] for row in variants}
    for row in variants:
        for page_id in page_ids:
            fused = json.loads((fusion / row["name"] / f"{page_id}.json").read_text())
            assert fused["page_id"] == page_id
            assert all("support" in r and "members" in r for r in fused["regions"])
    for page_id in page_ids:
        with Image.open(run / "review/pages" / page_id / "thumb.jpg") as thumb:
            assert thumb.width == 120 and thumb.height > 100
    assert (run / "review/index.html").exists()

    report = json.loads((run / "reports/run_all.json").read_text())
    assert {s["source"] for s in report["sources"]} == SOURCES
    assert all(s["device_used"] == "cpu" and s["counts"]["ok"] == 2 for s in report["sources"])

    code, out, _ = run_cli(capsys, "status", "--run-dir", run, "--json")
    status = json.loads(out)
    assert all(s["done"] == 2 and s["failed"] == 0 and s["pending"] == 0 for s in status["sources"])

    # Rerun: everything already done, nothing relaunched, still exit 0.
    code, out, err = run_cli(capsys, "run", "--input-dir", inputs, "--recursive", "--run-dir", run, "--json")
    assert code == 0, err
    assert all(s["launches"] == 0 and s["counts"]["skipped"] == 2 for s in json.loads(out)["sources"])
    # the report still says what ran where
    assert json.loads((run / "reports/run_all.json").read_text()) == report
