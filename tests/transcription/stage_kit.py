"""A rendered two-column page in a run dir, fused and with its text lines: what the transcription stage reads."""

import json
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont

from newsbag import rundir
from newsbag.resources import runners_dir
from newsbag.contract import boxes_from_page
from newsbag.fusion.fuse import articles

from nbtest import write_manifest

def needs_traineddata(*models: str):
    """Skip unless these traineddata are where the Tesseract runner looks (its own tessdata rule)."""
    sys.path.insert(0, str(runners_dir()))
    import recognize_tesseract  # noqa: PLC0415  (runners/ is not a package)

    folder = Path(recognize_tesseract.tessdata_dir({"tessdata": ""}))
    missing = [m for m in models if not (folder / f"{m}.traineddata").is_file()]
    return pytest.mark.skipif(bool(missing), reason=f"apt-get install "
                              f"{' '.join(recognize_tesseract.package_for(m) for m in missing)} (.ci/run installs them)")


def empty_tessdata(tmp_path):
    """A tessdata folder without any traineddata: a Tesseract recogniser pointed there finds no model."""
    folder = tmp_path / "no-tessdata"
    folder.mkdir()
    return folder


def words(text):
    """The words of a text read, lower case: a recogniser may miss one, never reorder them."""
    return set(text.lower().split())


def record_lines(record):
    """The lines of a transcript record, its regions' in reading order."""
    return [line for region in record["regions"] for line in region["lines"]]


HEADLINE = "Storm over the harbour"
LEFT = ["The ships came home", "late in the evening", "after the great wind"]
RIGHT = ["and the town council", "met on the next day", "to count the losses"]


def text_page(path):
    """A 1000x520 page: a headline over the left column, three lines per column; returns line boxes."""
    image = Image.new("L", (1000, 520), 255)
    draw = ImageDraw.Draw(image)
    big, font = ImageFont.load_default(size=44), ImageFont.load_default(size=30)
    draw.text((40, 30), HEADLINE, font=big, fill=0)
    lines = []
    for x, texts in ((40, LEFT), (540, RIGHT)):
        for k, text in enumerate(texts):
            y = 150 + 60 * k
            draw.text((x, y), text, font=font, fill=0)
            x0, y0, x1, y1 = draw.textbbox((x, y), text, font=font)
            lines.append([x0 - 4, y0 - 4, x1 + 4, y1 + 4])
    image.save(path)
    return lines


def page_record(pid, regions, source="C"):
    return {"page_id": pid, "image": {"path": f"img/{pid}.png", "width": 1000, "height": 520},
            "source": {"stage": "fusion", "variant": source, "family": "fusion", "model": "m", "device": "cpu"},
            "regions": [{"bbox_xyxy": b, "label": lab, "class": cls, "score": 0.9, "order": k, "text": None}
                        for k, (b, lab, cls) in enumerate(regions)], "seconds": 0.0}


def fused_record(pid, regions):
    """A fused page as the fusion stage writes it: each region with its article."""
    page = page_record(pid, regions)
    for region, article in zip(page["regions"], articles(boxes_from_page(page)).tolist()):
        region["article"] = article
    return page


def as_made_by(run, config_path):
    """The text-line pages of `write_run`, written by hand, as `config_path`'s text_lines stage would
    have made them (their fingerprints): current, so no run redoes what the transcripts read."""
    from newsbag.config import load_config
    from newsbag.manifest import read_pages

    (stage,) = [s for s in load_config(config_path).stages if s.name == "text_lines"]
    for record in read_pages(run):
        path = rundir.source_dir(run, "text_lines", "lines") / f"{record.page_id}.json"
        page = json.loads(path.read_text())
        page["source"]["fingerprint"] = stage.page_fingerprint("lines", record.image_sha256)
        path.write_text(json.dumps(page))


def write_run(tmp_path, pids=("p1",)):
    run = tmp_path / "run"
    (run / "manifests").mkdir(parents=True)
    (run / "img").mkdir()
    records = []
    for pid in pids:
        lines = text_page(run / "img" / f"{pid}.png")
        records.append({"page_id": pid, "path": f"img/{pid}.png", "image_path": str(run / "img" / f"{pid}.png"),
                        "width": 1000, "height": 520, "sha256": "0"})
        fused = fused_record(pid, [([30, 20, 560, 90], "headline", "headline"), ([30, 140, 480, 340], "text", "text"),
                             ([530, 140, 980, 340], "text", "text")])
        rundir.fused_dir(run, "C").mkdir(parents=True, exist_ok=True)
        (rundir.fused_dir(run, "C") / f"{pid}.json").write_text(json.dumps(fused))
        line_page = page_record(pid, [(b, "text_line", "text_line") for b in lines], "lines")
        line_page["source"] = {"stage": "text_lines", "variant": "lines", "family": "text_lines", "model": "m", "device": "cpu"}
        for r in line_page["regions"]:
            r["order"] = None
        rundir.source_dir(run, "text_lines", "lines").mkdir(parents=True, exist_ok=True)
        (rundir.source_dir(run, "text_lines", "lines") / f"{pid}.json").write_text(json.dumps(line_page))
    write_manifest(run, records)
    (rundir.fusion_dir(run) / "summary.json").write_text(json.dumps({"recommended_variant": "C"}))
    return run
