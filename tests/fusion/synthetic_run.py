"""A fixed multi-source synthetic newspaper run (pure function of a seed) for tests that pin fusion's output.

Each page is a broadsheet-like layout: a masthead, headlines, five columns of paragraphs, an
image, a table and a page number, with text lines inside every text and title block (some
merged across a gutter). Every source sees that layout its own way: paragraph or column
granularity, jittered corners, dropped and false boxes, its own raw labels, no scores
(MinerU), a page-sized "figure" on a page it failed, and lying boxes (off the page,
inverted, a null coordinate) that `page_repair.repair_regions` mends.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from nbtest import write_manifest

__all__ = ["TORCH_SOURCES", "LOCAL_SOURCES", "write_synthetic_run"]

W, H = 2400, 3400

# (stage, variant, family, style): style picks granularity and raw labels.
TORCH_SOURCES = [
    ("paddle_layout", "pp_doclayout_v2", "paddle_layout", "paddle"),
    ("paddle_layout", "pp_doclayout_v3", "paddle_layout", "paddle"),
    ("paddle_layout", "pp_doclayout_plus_l", "paddle_layout", "paddle"),
    ("paddle_vl15", "doc_parser", "paddle_vl15", "paddle"),
    ("dell", "american_stories", "dell", "dell"),
    ("mineru", "layout", "mineru", "mineru"),
    ("text_lines", "lines", "text_lines", "lines"),
]
LOCAL_SOURCES = [
    ("tesseract", "blocks", "tesseract", "tess_blocks"),
    ("tesseract", "paragraphs", "tesseract", "tess_paras"),
    ("paddle_layout", "cdla", "paddle_layout", "cdla"),
    ("text_lines", "lines", "text_lines", "lines"),
    ("text_lines", "blocks", "text_lines", "line_blocks"),
]

# canonical class -> raw label, per style
_RAW = {
    "paddle": {"text": "text", "headline": "paragraph_title", "image": "image", "table": "table",
               "masthead": "header", "page_number": "number"},
    "dell": {"text": "article", "headline": "headline", "image": "photograph", "table": "table",
             "masthead": "masthead", "page_number": "page_number"},
    "mineru": {"text": "text", "headline": "title", "image": "image", "table": "table",
               "masthead": "header", "page_number": "page_number"},
    "tess_blocks": {"text": "flowing_text", "headline": "heading_text", "image": "flowing_image",
                    "table": "table", "masthead": "heading_text", "page_number": "flowing_text"},
    "tess_paras": {"text": "paragraph", "headline": "paragraph", "image": "flowing_image", "table": "table",
                   "masthead": "paragraph", "page_number": "paragraph"},
    "cdla": {"text": "text", "headline": "title", "image": "figure", "table": "table", "masthead": "header",
             "page_number": "footer"},
}
# tesseract's heading_text is a title; its paragraphs and pages numbers read as text
_CLASS = {"tess_blocks": {"masthead": "headline", "page_number": "text"},
          "tess_paras": {"headline": "text", "masthead": "text", "page_number": "text"},
          "cdla": {"page_number": "footer"}}


def _layout(rng: np.random.Generator) -> tuple[list[tuple[list[float], str, int]], np.ndarray]:
    """Ground-truth blocks [(xyxy, canonical class, column or -1)] and (L, 4) text lines."""
    blocks: list[tuple[list[float], str, int]] = []
    lines: list[list[float]] = []
    margin, gutter, n_cols = 80.0, 24.0, 5
    col_w = (W - 2 * margin - (n_cols - 1) * gutter) / n_cols
    blocks.append(([margin, 60, W - margin, 260], "masthead", -1))
    lines.append([margin + 300, 90, W - margin - 300, 230])
    y_top = 300.0
    # a headline over two columns
    hx1 = margin + 2 * col_w + gutter
    blocks.append(([margin, y_top, hx1, y_top + 110], "headline", -1))
    lines += [[margin + 10, y_top + 8, hx1 - 10, y_top + 52], [margin + 10, y_top + 58, hx1 - 40, y_top + 102]]
    body_top = y_top + 140
    for c in range(n_cols):
        x0 = margin + c * (col_w + gutter)
        x1 = x0 + col_w
        y = body_top if c < 2 else y_top
        if c == 3:   # an image at the top of column 4
            blocks.append(([x0, y, x1, y + 420], "image", c))
            y += 440
        if c == 4:   # a table at the top of column 5
            blocks.append(([x0, y, x1, y + 300], "table", c))
            y += 320
        while y < H - 260:
            if rng.random() < 0.18:   # a small headline
                h = 70.0
                blocks.append(([x0, y, x1, y + h], "headline", c))
                lines.append([x0 + 20, y + 12, x1 - 20, y + h - 12])
                y += h + 14
                continue
            n = int(rng.integers(3, 14))
            h = n * 26.0 + 8
            if y + h > H - 240:
                break
            blocks.append(([x0, y, x1, y + h], "text", c))
            for k in range(n):
                ly = y + 4 + 26 * k
                right = x1 - 4 - (rng.uniform(20, 200) if k == n - 1 else rng.uniform(0, 6))
                # now and then OCR runs a line across the gutter into the next column
                if c < n_cols - 1 and rng.random() < 0.01:
                    right = x1 + gutter + 0.5 * col_w
                lines.append([x0 + 4 + rng.uniform(0, 4), ly, right, ly + 20])
            y += h + 12
    blocks.append(([W / 2 - 40, H - 150, W / 2 + 40, H - 110], "page_number", -1))
    lines.append([W / 2 - 36, H - 146, W / 2 + 36, H - 114])
    return blocks, np.array(lines)


def _regions(rng, blocks, lines, style: str, failed: bool) -> list[dict]:
    """One source's regions for the ground-truth `blocks` (see the module docstring)."""
    if style in ("lines", "line_blocks"):
        if style == "lines":
            xyxy = lines + rng.normal(0, 1.5, lines.shape)
            keep = rng.random(len(xyxy)) > 0.03
            return [_region(b, "text_line", "text_line", float(s))
                    for b, s in zip(xyxy[keep], rng.uniform(0.5, 1, keep.sum()))]
        out = []   # DB blocks: the text blocks, slightly loose
        for b, cls, _ in blocks:
            if cls in ("text", "headline", "masthead") and rng.random() > 0.1:
                out.append(_region(np.array(b) + rng.normal(0, 5, 4), "text_block", "text", float(rng.uniform(0.6, 1))))
        return out
    raw, fix = _RAW[style], _CLASS.get(style, {})
    if failed:
        return [_region([2, 3, W - 2, H - 4], raw["image"], "image", 0.55)]
    coarse = style in ("dell", "tess_blocks")   # article / block granularity: merge paragraph runs
    out: list[dict] = []
    run: list[list[float]] = []

    def flush():
        if run:
            x0 = min(b[0] for b in run)
            out.append(_noisy(rng, [x0, run[0][1], max(b[2] for b in run), run[-1][3]], "text", raw, fix, style))
            run.clear()

    for b, cls, col in blocks:
        if rng.random() < (0.12 if style == "mineru" else 0.07):
            continue   # missed
        if coarse and cls == "text":
            if run and (len(run) >= 3 or rng.random() < 0.3):
                flush()
            run.append(b)
            continue
        flush()
        if style == "paddle" and cls == "text" and b[3] - b[1] > 250 and rng.random() < 0.3:
            mid = (b[1] + b[3]) / 2   # split a long paragraph in two
            out.append(_noisy(rng, [b[0], b[1], b[2], mid - 2], cls, raw, fix, style))
            out.append(_noisy(rng, [b[0], mid + 2, b[2], b[3]], cls, raw, fix, style))
            continue
        out.append(_noisy(rng, b, cls, raw, fix, style))
    flush()
    # false positives, a two-column merge, and boxes that lie
    for _ in range(int(rng.integers(2, 6))):
        x, y = rng.uniform(0, W - 300), rng.uniform(0, H - 200)
        out.append(_noisy(rng, [x, y, x + rng.uniform(40, 300), y + rng.uniform(20, 200)], "text", raw, fix, style))
    if style in ("paddle", "cdla"):
        x0, y0 = 80.0, H * rng.uniform(0.3, 0.6)
        out.append(_noisy(rng, [x0, y0, x0 + 900, y0 + 400], "text", raw, fix, style))
    score = None if style == "mineru" else 0.7
    out.append(_region([-30, 100, 200, 300], raw["text"], fix.get("text", "text"), score))        # off the page
    out.append(_region([900, 1200, 700, 1100], raw["text"], fix.get("text", "text"), score))      # inverted
    out.append(_region([None, 10, 50, 60], raw["text"], fix.get("text", "text"), score))          # null coordinate
    out.append(_region([W - 100, 500, W + 80, 700], raw["image"], "image", score))                # past the edge
    return out


def _noisy(rng, b, cls, raw, fix, style) -> dict:
    xyxy = np.array(b, float) + rng.normal(0, 5, 4)
    score = None if style == "mineru" else float(rng.uniform(0.3, 1.0))
    return _region(xyxy, raw[cls], fix.get(cls, cls), score)


def _region(b, raw: str, cls: str, score) -> dict:
    bbox = [None if v is None else round(float(v), 2) for v in b]
    return {"bbox_xyxy": bbox, "label": raw, "class": cls, "score": None if score is None else round(score, 5),
            "order": None, "text": None}


def write_synthetic_run(run: Path, sources: list[tuple[str, str, str, str]], page_ids: list[str],
                        seed: int = 0) -> Path:
    """Write the manifest and every source page of a run of `page_ids` (deterministic in `seed`)."""
    (run / "manifests").mkdir(parents=True, exist_ok=True)
    manifest = []
    for p, pid in enumerate(page_ids):
        rng = np.random.default_rng([seed, p])
        blocks, lines = _layout(rng)
        image = {"path": f"../images/{pid}.png", "width": W, "height": H}
        manifest.append({"page_id": pid, "path": f"../images/{pid}.png", "image_path": f"/x/{pid}.png",
                         "width": W, "height": H, "sha256": "0" * 64})
        for s, (stage, variant, family, style) in enumerate(sources):
            src_rng = np.random.default_rng([seed, p, s])
            failed = p == 1 and s == 0   # the first source returns one page-sized figure on page 2
            page = {"page_id": pid, "image": image,
                    "source": {"stage": stage, "variant": variant, "family": family, "model": "synthetic",
                               "device": "cpu"},
                    "regions": _regions(src_rng, blocks, lines, style, failed), "seconds": 0.0}
            path = run / "outputs" / "sources" / stage / variant / f"{pid}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(page))
    write_manifest(run, manifest)
    return run
