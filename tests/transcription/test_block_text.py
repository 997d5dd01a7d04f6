"""Block text of page-reading models (PaddleOCR-VL, MinerU two_step) kept instead of recognition."""

import json
from pathlib import Path

import numpy as np
import pytest

from nbtest import shared_path, write_manifest

from newsbag import rundir
from newsbag.transcription.transcript import take_block_text
from newsbag.transcription.stage import run_transcription
from newsbag.transcription.options import parse_transcription_options

RUNNERS = Path(__file__).resolve().parents[2] / "runners"
SAMPLE = ("formats", "paddleocr_vl.res.json")  # PaddleOCR-VL's own output, in ../shared (see its README)

REGIONS = np.array([[0, 0, 100, 100], [0, 120, 100, 220]], float)
CROPS = np.array([[0, 5, 100, 15], [0, 25, 100, 35], [0, 125, 100, 135], [0, 145, 100, 155]], float)
CROP_REGION = np.array([0, 0, 1, 1])


@pytest.mark.parametrize("blocks, taken, block_region", [
    ([[0, 0, 100, 40]], [True, False], [0]),                      # a block holding both lines of region 0
    ([[0, 0, 100, 20]], [False, False], [-1]),                    # half of region 0's lines: recognised
    ([[0, 80, 100, 160]], [False, False], [-1]),                  # a block across two regions: neither
    ([[0, 0, 100, 18], [0, 20, 100, 40]], [True, False], [0, 0]),  # two blocks in one region
    ([], [False, False], []),                                     # no block: (0,) result
])
def test_take_block_text(blocks, taken, block_region):
    got_taken, got_region = take_block_text(REGIONS, CROPS, CROP_REGION, np.array(blocks, float))
    assert got_taken.tolist() == taken and got_region.tolist() == block_region


def test_a_region_without_lines_takes_a_block_inside_it():
    taken, region = take_block_text(REGIONS, CROPS[:2], CROP_REGION[:2], np.array([[10, 130, 90, 200]], float))
    assert taken.tolist() == [False, True] and region.tolist() == [1]


@pytest.mark.parametrize("value", ["paddle_vl15/doc_parser", ["paddle_vl15"], [3]])
def test_block_text_sources_must_be_a_list_of_sources(value):
    with pytest.raises(ValueError, match="block_text_sources"):
        parse_transcription_options({"block_text_sources": value})


def test_a_page_read_whole_by_paddleocr_vl_needs_no_recogniser(tmp_path, monkeypatch):
    # The source page is what the paddle_vl15 runner writes from PaddleOCR-VL's real result
    # (../shared/formats' paddleocr_vl.res.json, 2000x3000): its text blocks carry block_content.
    monkeypatch.syspath_prepend(str(RUNNERS))
    from paddle_vl15 import regions_from_vl

    res = json.loads(shared_path(*SAMPLE).read_text())
    regions = regions_from_vl(res, 2000, 3000)
    page = {"page_id": "p1", "image": {"path": "img/p1.png", "width": 2000, "height": 3000}, "seconds": 0.0}
    vl = {**page, "source": {"stage": "paddle_vl15", "variant": "doc_parser", "family": "paddle_vl15",
                             "model": "PaddleOCR-VL-1.5", "device": "gpu"},
          "regions": [{**r, "class": "text"} for r in regions]}
    first = {}
    for r in regions:
        first.setdefault(r["label"], r)
    # fused: the title and the first paragraph, a little larger than the VL blocks, one article
    fused_boxes = [[170, 140, 1830, 270], [170, 410, 1830, 810]]
    fused = {**page, "source": {"stage": "fusion", "variant": "C", "family": "fusion", "model": "m", "device": "cpu"},
             "regions": [{"bbox_xyxy": b, "label": lab, "class": lab, "score": 0.9, "order": k, "text": None,
                          "article": 0} for k, (b, lab) in enumerate(zip(fused_boxes, ["headline", "text"]))]}
    lines = {**page, "source": {"stage": "text_lines", "variant": "lines", "family": "text_lines", "model": "m",
                                "device": "cpu"},
             "regions": [{"bbox_xyxy": [185, y, 1815, y + 40], "label": "text_line", "class": "text_line",
                          "score": 0.9, "order": None, "text": None} for y in (180, 430, 490, 550, 610, 670, 730)]}
    run = tmp_path / "run"
    write_manifest(run, [{"page_id": "p1", "path": "img/p1.png", "image_path": str(run / "img" / "p1.png"),
                          "width": 2000, "height": 3000, "sha256": "0"}])
    for folder, doc in ((rundir.fused_dir(run, "C"), fused), (rundir.source_dir(run, "text_lines", "lines"), lines),
                        (rundir.source_dir(run, "paddle_vl15", "doc_parser"), vl)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "p1.json").write_text(json.dumps(doc))
    (rundir.fusion_dir(run) / "summary.json").write_text(json.dumps({"recommended_variant": "C"}))

    result = run_transcription(run, ["p1"], {"block_text_sources": ["paddle_vl15/doc_parser", "mineru/layout"]})
    assert (result["ok"], result["failed"]) == (1, 0)
    out = rundir.transcript_dir(run, "C")
    assert not (out / "_lines").exists()          # the recogniser never ran (no image exists either)
    record = json.loads((out / "p1.json").read_text())
    texts = [r["text"] for r in record["regions"]]
    assert texts == [first["doc_title"]["text"], first["text"]["text"]]
    assert record["text"] == "\n".join(t.replace("\n", " ") for t in texts)   # one article: headline, paragraph
    assert {line["source"] for r in record["regions"] for line in r["lines"]} == {"paddle_vl15/doc_parser"}


def test_the_torch_config_keeps_paddleocr_vl_and_mineru_text():
    from newsbag.config import load_config

    cfg = load_config(RUNNERS.parent / "configs" / "pipeline.torch.json")
    stage = next(s for s in cfg.stages if s.name == "transcription")
    sources = parse_transcription_options(stage.options).block_text_sources
    assert sources == ("paddle_vl15/doc_parser", "mineru/layout")
    stage_variants = {f"{s.name}/{v}" for s in cfg.stages if hasattr(s, "variants") for v in s.variants}
    assert set(sources) <= stage_variants          # both name sources the config runs
