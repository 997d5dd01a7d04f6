"""How long the review gallery takes to open in headless Chromium for a synthetic N-page run.

Writes a synthetic RUN/review (index.html with N page rows and both leaderboards; data.js
and a scan for a few pages, each with `--boxes` fused boxes, as many source boxes and 1,500
text lines), then measures in a real Chromium (DevTools protocol over a pipe, as the tests do):

- paint: navigation start -> first contentful paint (the header and leaderboards);
- ready: navigation start -> page list drawn (performance.now() at the end of gallery.js);
- sort: one click on a metric header -> list redrawn;
- filter: typing a 5-character needle, one input event per character -> list redrawn (summed);
- open: a click on a row -> that page's data.js loaded and its overlays drawn;
- memory: the page's JS heap after all that, and the memory of all Chromium's processes (PSS).

    PYTHONPATH=src python benchmarks/gallery_load.py --pages 5000 [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "review"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from cdp import CHROMIUM, Browser  # noqa: E402
from _machine import machine_line  # noqa: E402

from newsbag.review.gallery import DATA_JS, SCANS, page_layer, write_gallery, write_page_data  # noqa: E402
from newsbag.review.listing import gallery_context  # noqa: E402
from newsbag.review.state import Outcome  # noqa: E402

W, H = 2400, 3200


def _regions(rng: random.Random, n: int, fused: bool, label: str = "text") -> list[dict]:
    out = []
    for k in range(n):
        x0, y0 = rng.uniform(0, W - 200), rng.uniform(0, H - 100)
        r = {"bbox_xyxy": [x0, y0, x0 + rng.uniform(40, 400), y0 + rng.uniform(20, 300)], "label": label,
             "class": label, "score": round(rng.random(), 3), "order": k if fused else None, "text": None}
        if fused:
            r["support"] = ["a/x", "b/y"]
            r["members"] = [{"source": "a/x", "bbox_xyxy": r["bbox_xyxy"], "label": label, "score": 0.9}]
        out.append(r)
    return out


def build(root: Path, n_pages: int, n_boxes: int, n_data: int) -> Path:
    rng = random.Random(0)
    review = root / "review"
    outcomes = []
    for k in range(n_pages):
        page_id = f"issue{k // 8:04d}__p{k % 8}-{k:08x}"
        score = {"review_priority": rng.random() * 3, "source_disagreement": rng.random(), "fused_disagreement": rng.random(),
                 "line_coverage": rng.random(), "failed_share": 0.0, "failed_sources": [],
                 "reasons": ["sources disagree: 60% of blocks unmatched between sources"] if k % 3 == 0 else []}
        outcomes.append(Outcome(page_id, "ok", info={"priority": score, "path": f"scans/{page_id}.tif"}))
    ranked = sorted(outcomes, key=lambda o: -o.info["priority"]["review_priority"])
    ctx = gallery_context(root, ranked, [], {"a/x": None, "b/y": None, "text_lines/lines": None},
                           {"v1": None, "v2": None}, "v1", "top20_informative", absent=0)
    ctx["leaderboards"] = [("Fusion variants", {"columns": ["rank", "name", "score"],
                                                "rows": [[1, "v1", 0.7], [2, "v2", 0.6]]}),
                           ("Sources", {"columns": ["rank", "name", "score"], "rows": [[1, "a/x", 0.6]]})]
    write_gallery(review / "index.html", ctx)
    for o in ranked[:n_data]:
        page_dir = review / "pages" / o.page_id
        page_dir.mkdir(parents=True, exist_ok=True)
        im = Image.new("L", (1600, round(1600 * H / W)), 245)
        draw = ImageDraw.Draw(im)
        for y in range(40, im.height - 40, 14):
            draw.rectangle([60, y, im.width - 60, y + 6], fill=40)
        im.save(page_dir / SCANS[1], quality=60)
        page = lambda regions: {"page_id": o.page_id, "image": {"path": "", "width": W, "height": H},  # noqa: E731
                                "regions": regions}
        layers = [page_layer("a/x", "source", page(_regions(rng, n_boxes, False))),
                  page_layer("b/y", "source", page(_regions(rng, n_boxes, False))),
                  page_layer("text_lines/lines", "source", page(_regions(rng, 1500, False, "text_line"))),
                  page_layer("fusion/v1", "fused", page(_regions(rng, n_boxes, True)), recommended=True),
                  page_layer("fusion/v2", "fused", page(_regions(rng, n_boxes, True)))]
        write_page_data(page_dir / DATA_JS, o.page_id, W, H, layers, SCANS[1])
    return review / "index.html"


def _tree_pss_mb(pid: int) -> float:
    """Proportional set size (shared pages split between sharers) of `pid` and its descendants
    (Chromium's browser, renderer, GPU and zygote processes), MB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            total += next(int(line.split()[1]) for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines()
                          if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return round(total / 1024, 1)


_TYPE = """(() => { const f = document.getElementById('filter'); let total = 0; f.value = '';
  for (const ch of %s) { const t = performance.now(); f.value += ch; f.dispatchEvent(new Event('input'));
    total += performance.now() - t; }
  return total; })()"""


def measure(index: Path, runs: int) -> dict:
    times: dict[str, list[float]] = {"paint_ms": [], "ready_ms": [], "sort_ms": [], "filter_ms": [], "open_ms": [],
                                     "js_heap_mb": [], "chromium_pss_mb": []}
    with tempfile.TemporaryDirectory() as profile:
        for _ in range(runs):
            b = Browser(Path(profile) / "p", width=1400, height=1000)
            try:
                b.goto(index.as_uri())
                times["ready_ms"].append(float(b.eval("document.body.dataset.readyMs")))
                paint = b.eval("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime")
                times["paint_ms"].append(float("nan") if paint is None else paint)  # none when nothing painted yet
                b.eval("window.__t0 = performance.now(); document.querySelector('#page-list tbody tr').click()")
                b.wait_for("document.getElementById('viewer').dataset.page && "
                           "document.getElementById('viewer').dataset.page !== 'error'")
                times["open_ms"].append(float(b.eval("parseFloat(document.getElementById('viewer').dataset.renderedAt)"
                                                     " - window.__t0")))
                t = b.eval("(() => { const t = performance.now();"
                           " document.querySelector(\"#page-list th[data-key='source_disagreement']\").click();"
                           " return performance.now() - t; })()")
                times["sort_ms"].append(t)
                times["filter_ms"].append(b.eval(_TYPE % json.dumps("ue0001")))
                filtered = b.eval("document.getElementById('shown').textContent")
                b.eval("(() => { const f = document.getElementById('filter'); f.value = '';"
                       " f.dispatchEvent(new Event('input')); })()")
                b.send("HeapProfiler.collectGarbage")
                times["js_heap_mb"].append(round(b.send("Runtime.getHeapUsage")["usedSize"] / 2**20, 1))
                times["chromium_pss_mb"].append(_tree_pss_mb(b.proc.pid))
                rows = b.eval("document.querySelectorAll('#page-list tbody tr').length")
                total = b.eval("document.getElementById('shown').textContent")
                errors = b.console_errors()
            finally:
                b.close()
    return {k: round(statistics.median([x for x in v if x == x] or [float("nan")]), 1) for k, v in times.items()} | {
        "rows_in_dom": rows, "shown": total, "filtered": filtered, "errors": errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--boxes", type=int, default=300, help="boxes per source and fused layer")
    ap.add_argument("--data-pages", type=int, default=3, help="pages that get a data.js and scan")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build here and keep it (default: a temp folder)")
    args = ap.parse_args()
    if CHROMIUM is None:
        sys.exit("chromium not found")
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        t0 = time.perf_counter()
        index = build(root, args.pages, args.boxes, args.data_pages)
        built = time.perf_counter() - t0
        result = measure(index, args.runs)
        data_js = next((root / "review" / "pages").glob(f"*/{DATA_JS}"))
        print(json.dumps({"pages": args.pages, "index_html_bytes": index.stat().st_size,
                          "data_js_bytes": data_js.stat().st_size, "build_s": round(built, 2), **result}, indent=1))


if __name__ == "__main__":
    main()
