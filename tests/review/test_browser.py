"""The gallery in a real headless Chromium (DevTools protocol over a pipe): it loads from file://,
tables sort, a page opens with its scan under the overlays, a toggle hides a layer, hovering a
box shows its label, and a screenshot shows the boxes over the scan."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from cdp import CHROMIUM, Browser
from review_kit import build_run, run_kit  # noqa: F401  (fixture)

from newsbag.review.gallery import SCRIPTS
from newsbag.review.stage import run_review

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (run .ci/browser_setup.sh)"),
]

SUMMARY = {"recommended_variant": "v1", "variant_leaderboard": [
    {"rank": 1, "name": "v1", "method": "consensus", "n_pages": 3, "score": 0.7, "line_coverage": 0.9},
    {"rank": 2, "name": "v0", "method": "wbf", "n_pages": 3, "score": 0.5, "line_coverage": 0.95}],
    "source_leaderboard": [{"rank": 1, "name": "a/x", "family": "a", "n_pages": 3, "score": 0.6}]}


@pytest.fixture
def gallery(tmp_path):
    run = build_run(tmp_path, summary=SUMMARY)
    run_review(run, ["p1", "p2", "p3"], {"top_n": 20})
    return run / "review" / "index.html"


@pytest.fixture
def browser(tmp_path):
    b = Browser(tmp_path / "profile", width=1280, height=1000)
    yield b
    b.close()


def _open_page(browser, gallery, page_id="p1"):
    browser.goto(gallery.as_uri() + f"#page={page_id}")
    browser.wait_for(f"document.getElementById('viewer').dataset.page === '{page_id}'")
    browser.wait_for("document.getElementById('scan').complete && document.getElementById('scan').naturalWidth > 0")
    browser.eval("document.getElementById('viewer').scrollIntoView()")


def _center(browser, selector):
    return browser.eval(f"""(() => {{ const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
                           return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")


def test_page_loads_lists_pages_and_sorts(browser, gallery):
    browser.goto(gallery.as_uri())
    rows = browser.eval("Array.from(document.querySelectorAll('#page-list tbody tr')).map(r => r.dataset.page)")
    assert rows == ["p2", "p1"]  # informative first; p3 failed
    assert browser.eval("document.getElementById('shown').textContent") == "1–2 of 2 pages"
    assert browser.eval("document.querySelectorAll('tr.failed-page[data-page=p3]').length") == 1
    # leaderboard: click the score header twice (ascending, then descending)
    board = "table.sortable[data-board='1']"
    names = f"Array.from(document.querySelectorAll(\"{board} tbody tr\")).map(r => r.cells[1].textContent)"
    assert browser.eval(names) == ["v1", "v0"]
    score_th = f"{board} th[data-name='score']"
    browser.click(*_center(browser, score_th))
    assert browser.eval(names) == ["v0", "v1"]
    # page list: sort by page id with a real click on its header
    browser.click(*_center(browser, "#page-list th[data-key='page_id']"))
    assert browser.eval("Array.from(document.querySelectorAll('#page-list tbody tr')).map(r => r.dataset.page)") == ["p1", "p2"]
    assert browser.console_errors() == []


def test_toggle_hides_a_layer(browser, gallery):
    _open_page(browser, gallery)
    layers = browser.eval("Array.from(document.querySelectorAll('#layers input')).map(i => [i.dataset.layer, i.checked])")
    assert layers == [["a/x", False], ["b/y", False], ["fusion/v1", True]]
    shown = "getComputedStyle(document.querySelector('svg.layer[data-layer=\"fusion/v1\"]')).display"
    assert browser.eval(shown) != "none"
    browser.click(*_center(browser, "#layers input[data-layer='fusion/v1']"))
    assert browser.eval(shown) == "none"
    browser.click(*_center(browser, "#layers input[data-layer='a/x']"))
    assert browser.eval("getComputedStyle(document.querySelector('svg.layer[data-layer=\"a/x\"]')).display") != "none"
    assert browser.console_errors() == []


def test_hover_shows_the_boxs_label_score_and_support(browser, gallery):
    _open_page(browser, gallery)
    assert browser.eval("document.getElementById('tip').hidden") is True
    x, y = _center(browser, "svg.layer[data-layer='fusion/v1'] rect")
    browser.mouse("mouseMoved", x, y)
    browser.wait_for("!document.getElementById('tip').hidden")
    tip = browser.eval("Object.fromEntries(Array.from(document.querySelectorAll('#tip > div')).map("
                       "d => [d.querySelector('.k').textContent, d.querySelector('.v').textContent]))")
    assert tip["label"] == "text"
    assert tip["layer"] == "fusion/v1"
    assert tip["score"] == "0.900"
    browser.mouse("mouseMoved", 2, 2)
    browser.wait_for("document.getElementById('tip').hidden")


def test_screenshot_shows_boxes_over_the_scan(browser, gallery, tmp_path):
    _open_page(browser, gallery, "p2")  # fused v1 on the left column, source b/y on the right
    browser.click(*_center(browser, "#layers input[data-layer='b/y']"))  # a second layer, dashed
    shot = tmp_path / "gallery.png"
    browser.screenshot(shot)
    stage = browser.eval("(() => { const r = document.getElementById('stage').getBoundingClientRect();"
                         " return [r.left, r.top, r.right, Math.min(r.bottom, innerHeight)]; })()")
    with Image.open(shot) as im:
        arr = np.asarray(im.convert("RGB")).astype(int)
    x0, y0, x1, y1 = (int(round(v)) for v in stage)
    region = arr[y0:y1, x0:x1]
    assert region.shape[0] > 300 and region.shape[1] > 600   # beside the page list
    # The scan is there: its dark 'text' bars ...
    dark = (region.max(axis=2) < 90).mean()
    assert dark > 0.05
    # ... and the boxes over it: red text outlines (fused solid, b/y dashed) on both halves.
    red = (region[..., 0] > 170) & (region[..., 1] < 90) & (region[..., 2] < 90)
    half = region.shape[1] // 2
    assert red[:, :half].sum() > 500 and red[:, half:].sum() > 200


def _cells(browser):
    return browser.eval("Object.fromEntries(Array.from(document.querySelectorAll('#page-list tbody tr')).map("
                        "r => [r.dataset.page, r.querySelector('.why').textContent]))")


def test_a_page_not_fused_yet_or_whose_fusion_failed_says_so_in_the_list_and_page_view(browser, run_kit):
    """Reviewed while fusion was partial (p2) or after it failed on a page (p3): the list read 'no
    threshold crossed' and p2's page view had no fused layer at all, so neither looked wrong."""
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a], "fusion/v1": [a]},
                               "p2": {"a/x": [a], "b/y": [a]}, "p3": {"a/x": [a], "b/y": [a]}}, summary=SUMMARY)
    failed = run / "outputs" / "fusion" / "v1" / "_failed" / "p3.json"
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps({"page_id": "p3", "error": "boom"}))
    run_review(run, ["p1", "p2", "p3"], {"top_n": 20})
    gallery = run / "review" / "index.html"
    browser.goto(gallery.as_uri())
    assert _cells(browser) == {"p1": "no threshold crossed; ranked by review priority",
                               "p2": "fused v1 not made yet for this page (fusion pending): scored without it",
                               "p3": "fused v1 failed on this page: scored without it"}
    for page_id, state in (("p2", "not fused yet"), ("p3", "FAILED")):
        browser.click(*_center(browser, f"#page-list tr[data-page={page_id}]"))
        browser.wait_for(f"document.getElementById('viewer').dataset.page === '{page_id}'")
        labels = browser.eval("Array.from(document.querySelectorAll('#layers label')).map("
                              "l => [l.textContent.trim(), l.classList.contains('bad')])")
        assert labels == [["a/x (1)", False], ["b/y (1)", False], [f"fusion/v1 ★ ({state})", True]]
    assert browser.console_errors() == []


HOSTILE = "O'Brien \"q\" <b>&amp;</b> </script><script>window.PWNED=1</script> é 中 \u2028 %2F"


def test_hostile_paths_labels_and_names_are_shown_as_text_and_run_no_script(browser, tmp_path):
    """Quotes, <, &, </script>, unicode and a line separator in a page's file path, a box's raw
    label, a leaderboard name, an error and the run folder's name: shown verbatim, nothing runs."""
    summary = {"recommended_variant": "v1", "variant_leaderboard": [
        {"rank": 1, "name": "v1" + HOSTILE, "method": "m", "n_pages": 3, "score": 0.5}]}
    run = build_run(tmp_path / HOSTILE.replace("/", "_"), summary=summary)
    manifest = run / "manifests" / "pages.jsonl"
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    manifest.write_text("".join(json.dumps(r | {"path": f"{HOSTILE}/{r['page_id']}.png"}) + "\n" for r in rows))
    fused = run / "outputs" / "fusion" / "v1" / "p1.json"
    fused.write_text(json.dumps(json.loads(fused.read_text()) | {"regions": [
        {"bbox_xyxy": [10, 10, 110, 150], "label": HOSTILE, "class": "text", "score": 0.9, "order": 0, "text": None}]}))
    run_review(run, ["p1", "p2", "p3"], {"top_n": 20})
    gallery = run / "review" / "index.html"
    _open_page(browser, gallery, "p1")
    assert browser.eval("window.PWNED") is None
    assert browser.eval("document.title") == "newsbag review: run"
    assert browser.eval("document.querySelector(\"table.sortable[data-board='1'] tbody tr\").cells[1].textContent") \
        == "v1" + HOSTILE
    assert HOSTILE.replace("/", "_") in browser.eval(
        "document.querySelector('tr.failed-page[data-page=p3]').cells[1].textContent")  # the run folder's name
    # the path is searchable as typed
    browser.eval("(() => { const f = document.getElementById('filter'); f.value = \"o'brien \\\"q\\\" <b>\";"
                 " f.dispatchEvent(new Event('input')); })()")
    assert browser.eval("document.getElementById('shown').textContent") == "1–2 of 2 pages"
    x, y = _center(browser, "svg.layer[data-layer='fusion/v1'] rect")
    browser.mouse("mouseMoved", x, y)
    browser.wait_for("!document.getElementById('tip').hidden")
    assert browser.eval("document.querySelector('#tip .tip-label .v').textContent") == f"text ({HOSTILE})"
    # the data block, the gallery's scripts and evaluation.js's tag
    assert browser.eval("document.querySelectorAll('script').length") == 1 + len(SCRIPTS) + 1
    assert browser.console_errors() == []


def test_a_shared_page_link_pasted_into_an_open_gallery_opens_that_page(browser, gallery):
    """index.html#page=<id> opened the page only on a fresh load: pasted into the tab already
    showing the gallery (same document, only the fragment changes) it did nothing."""
    browser.goto(gallery.as_uri())
    # a wide screen opens on the page most worth a look
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p2'", timeout=10)
    browser.eval("location.hash = '#page=p1'")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p1'", timeout=10)
    assert browser.eval("document.getElementById('viewer-title').textContent") == "p1"
    browser.eval("location.hash = '#page=p2'")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p2'", timeout=10)
    assert browser.console_errors() == []


def test_blank_cells_sort_last_both_ways_in_the_page_list_and_the_leaderboards(browser, run_kit):
    """Sorting high-first (the default for scores and disagreements) put every blank cell first:
    pages not fused or not scored, thousands at collection scale, filled the first views."""
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a], "fusion/v1": [a]},
                               "p2": {"a/x": [a], "b/y": [a]}, "p3": {"a/x": [a], "b/y": [run_kit.box_b_far]}},
                        summary={"recommended_variant": "v1", "variant_leaderboard": [
                            {"rank": 1, "name": "v1", "method": "m", "n_pages": 3, "score": 0.7},
                            {"rank": 2, "name": "v0", "method": "m", "n_pages": 0, "score": None},
                            {"rank": 3, "name": "v2", "method": "m", "n_pages": 3, "score": 0.5}]})
    run_review(run, ["p1", "p2", "p3"], {"top_n": 20})
    browser.goto((run / "review" / "index.html").as_uri())
    pages = "Array.from(document.querySelectorAll('#page-list tbody tr')).map(r => r.dataset.page)"
    for key, high_first, low_first in (("fused_disagreement", ["p1", "p3", "p2"], ["p1", "p3", "p2"]),
                                       ("source_disagreement", ["p3", "p1", "p2"], ["p1", "p2", "p3"])):
        browser.click(*_center(browser, f"#page-list th[data-key='{key}']"))
        assert browser.eval(pages) == high_first, key
        browser.click(*_center(browser, f"#page-list th[data-key='{key}']"))
        assert browser.eval(pages) == low_first, key
    names = "Array.from(document.querySelectorAll(\"table.sortable[data-board='1'] tbody tr\")).map(r => r.cells[1].textContent)"
    score_th = "table.sortable[data-board='1'] th[data-name='score']"
    browser.click(*_center(browser, score_th))
    assert browser.eval(names) == ["v2", "v1", "v0"]
    browser.click(*_center(browser, score_th))
    assert browser.eval(names) == ["v1", "v2", "v0"]
    assert browser.console_errors() == []


def test_a_page_whose_recommended_fused_layer_failed_or_is_pending_opens_on_a_fused_layer_with_boxes(browser, run_kit):
    """The page view starts with the recommended fused layer on; when that one failed on the page
    or is not made yet it has no boxes, so the page opened with no overlay at all."""
    a = run_kit.box_a
    run = run_kit.build(pages={"p1": {"a/x": [a], "b/y": [a], "fusion/v1": [a], "fusion/v2": [a]},
                               "p2": {"a/x": [a], "b/y": [a], "fusion/v2": [a]},
                               "p3": {"a/x": [a], "b/y": [a], "fusion/v2": [a]}}, summary=SUMMARY)
    failed = run / "outputs" / "fusion" / "v1" / "_failed" / "p3.json"
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps({"page_id": "p3", "error": "boom"}))
    run_review(run, ["p1", "p2", "p3"], {"top_n": 20})
    gallery = run / "review" / "index.html"
    on = "Array.from(document.querySelectorAll('#layers input')).filter(i => i.checked).map(i => i.dataset.layer)"
    browser.goto(gallery.as_uri())
    for page_id, expected in (("p1", ["fusion/v1"]), ("p2", ["fusion/v2"]), ("p3", ["fusion/v2"])):
        browser.click(*_center(browser, f"#page-list tr[data-page={page_id}]"))
        browser.wait_for(f"document.getElementById('viewer').dataset.page === '{page_id}'")
        assert browser.eval(on) == expected, page_id
        browser.click(*_center(browser, "#viewer-close"))
    assert browser.console_errors() == []


def _long_gallery(root, n_pages):
    """index.html listing `n_pages` pages (ranked p0000 first) and the page data of each, without boards."""
    from newsbag.review.gallery import DATA_JS, page_layer, write_gallery, write_page_data
    from newsbag.review.listing import gallery_context
    from newsbag.review.state import Outcome

    review = root / "review"
    score = {"review_priority": 1.0, "source_disagreement": 0.5, "fused_disagreement": 0.5, "line_coverage": None,
             "failed_share": 0.0, "failed_sources": [], "reasons": []}
    ranked = [Outcome(f"p{k:04d}", "ok", info={"priority": score, "path": f"p{k:04d}.png"}) for k in range(n_pages)]
    write_gallery(review / "index.html", gallery_context(root, ranked, [], {"a/x": None}, {}, None, "top",
                                                          absent=0))
    for o in ranked:
        page = {"page_id": o.page_id, "image": {"path": "", "width": 100, "height": 100},
                "regions": [{"bbox_xyxy": [10, 10, 50, 50], "label": "text", "class": "text", "score": 0.9}]}
        (review / "pages" / o.page_id).mkdir(parents=True)
        write_page_data(review / "pages" / o.page_id / DATA_JS, o.page_id, 100, 100,
                        [page_layer("a/x", "source", page)], "scan.jpg")
    return review / "index.html"


def test_stepping_past_the_last_row_in_view_moves_the_list_with_the_page(browser, tmp_path):
    """j/k and a shared link open pages beyond the 100 rows in view; the list stayed on its view,
    so after the 100th page it no longer showed the page open (nor, once closed, where the
    reviewer was)."""
    gallery = _long_gallery(tmp_path, 150)
    browser.goto(gallery.as_uri())
    shown = "document.getElementById('shown').textContent"
    in_view = "Array.from(document.querySelectorAll('#page-list tbody tr')).map(r => r.dataset.page)"
    browser.click(*_center(browser, "#next-rows"))
    assert browser.eval(shown) == "101–150 of 150 pages"
    browser.click(*_center(browser, "#prev-rows"))
    browser.eval("document.querySelector('#page-list tr[data-page=p0099]').click()")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p0099'")
    browser.send("Input.dispatchKeyEvent", type="keyDown", key="j", text="j")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p0100'", timeout=10)
    assert browser.eval(shown) == "101–150 of 150 pages"
    assert "p0100" in browser.eval(in_view)
    browser.send("Input.dispatchKeyEvent", type="keyDown", key="k", text="k")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p0099'", timeout=10)
    assert browser.eval(shown) == "1–100 of 150 pages"
    browser.eval("location.hash = '#page=p0120'")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p0120'", timeout=10)
    assert browser.eval(shown) == "101–150 of 150 pages"
    assert browser.console_errors() == []


def test_a_link_to_a_page_whose_review_failed_shows_why_not_rerun_advice(browser, gallery):
    """A shared link to a page whose review failed (p3: its fused page is broken) said 'no page
    data; rerun newsbag review', which fails the same way again; it now shows the page's error."""
    browser.goto(gallery.as_uri() + "#page=p3")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'error'", timeout=10)
    title = browser.eval("document.getElementById('viewer-title').textContent")
    assert title.startswith("p3: review failed: unreadable page ") and title.endswith(
        "p3.json: Expecting value: line 1 column 31 (char 30)"), title
    browser.eval("location.hash = '#page=nope'")
    browser.wait_for("document.getElementById('viewer-title').textContent.startsWith('nope: ')", timeout=10)
    assert browser.eval("document.getElementById('viewer-title').textContent") == \
        "nope: no page data (not reviewed yet or out of date: rerun newsbag review)"


# ---- screens, plots, evaluation ----

_BOXES = ("(() => { const r = (id) => document.getElementById(id).getBoundingClientRect();"
          " const a = r('pages'), b = r('viewer'); return [a.left, a.top, a.right, b.left, b.top, b.right]; })()")


def _evaluated_gallery(run_kit):
    """A reviewed run with fusion's per-page scores, then `newsbag evaluate`'s files and evaluation.js."""
    from newsbag.review.evaluation import write_evaluation_data

    run = run_kit.build(summary=SUMMARY)
    scores = {"p1": {"v1": 0.9, "a/x": 0.7, "b/y": 0.6}, "p2": {"v1": 0.5, "a/x": 0.75, "b/y": 0.2}}
    run_kit.write_evaluation(run, {}, scores, {})   # fusion's tables; no evaluation yet
    run_review(run, ["p1", "p2", "p3"], {"top_n": 1})
    gallery = run / "review" / "index.html"
    before = gallery.read_bytes()
    run_kit.write_evaluation(run, {"p1": {"v1": 0.8, "a/x": 0.5, "b/y": 0.3}, "p2": {"v1": 0.4, "a/x": 0.6, "b/y": 0.1}},
                             scores, {"p2": [[20, 20, 220, 300, "text"], [260, 20, 460, 300, "graphic"]]})
    write_evaluation_data(run)        # what `newsbag evaluate` does
    assert gallery.read_bytes() == before
    return gallery


@pytest.mark.parametrize("width, height, side_by_side", [(1400, 1000, True), (390, 844, False)])
def test_the_gallery_fits_the_screen_list_beside_the_page_on_desktop_stacked_on_a_phone(tmp_path, run_kit, width,
                                                                                          height, side_by_side):
    """The page list was 3,189 px wide: the whole document scrolled sideways on desktop and phone,
    and a row opened the page under the list (the window jumped). Now nothing overflows, the list
    and page view sit side by side on a wide screen (a click opens the page beside the list, the
    window stays), they stack on a phone, and the strip plots are drawn."""
    gallery = _evaluated_gallery(run_kit)
    browser = Browser(tmp_path / "profile", width=width, height=height)
    try:
        browser.goto(gallery.as_uri())
        if not side_by_side:
            browser.eval("document.querySelector('#page-list tr[data-page=p2]').click()")
        browser.wait_for("document.getElementById('viewer').dataset.page === 'p2'", timeout=10)
        browser.wait_for("document.body.dataset.evaluation === '1'", timeout=10)
        assert browser.eval("document.documentElement.scrollWidth <= innerWidth"), \
            browser.eval("[document.documentElement.scrollWidth, innerWidth]")
        a_left, a_top, a_right, b_left, b_top, b_right = browser.eval(_BOXES)
        if side_by_side:
            assert a_right <= b_left + 1 and abs(a_top - b_top) < 2 and b_right <= width
            y = browser.eval("scrollY")
            browser.click(*_center(browser, "#page-list tr[data-page=p1]"))
            browser.wait_for("document.getElementById('viewer').dataset.page === 'p1'", timeout=10)
            assert browser.eval("scrollY") == y
        else:
            assert b_top >= a_top and abs(a_left - b_left) < 2
        # a dot a page per variant and source, the open page's in red; more columns on demand
        assert browser.eval("document.querySelectorAll('#strip-all svg circle').length") == 6
        assert browser.eval("document.querySelectorAll('#strip-page svg circle.here').length") == 3
        hidden = "getComputedStyle(document.querySelector('#page-list th.extra')).display"
        assert browser.eval(hidden) == "none"
        browser.eval("document.getElementById('more-columns').click()")
        assert browser.eval(hidden) != "none"
        assert browser.eval("document.documentElement.scrollWidth <= innerWidth")
        # the column definitions are text on the page, not tooltips
        browser.eval("document.getElementById('definitions').open = true")
        assert "higher = look first" in browser.eval("document.getElementById('definitions').innerText")
        browser.eval("document.getElementById('leaderboard-legend').open = true")
        legend = browser.eval("document.getElementById('leaderboard-legend').innerText")
        assert "score\n" in legend and "higher is better" in legend and "uses no ground truth" in legend
        assert browser.console_errors() == []
        shot = tmp_path / "shot.png"
        browser.screenshot(shot)
        with Image.open(shot) as im:
            assert im.size == (width, height)
    finally:
        browser.close()


def test_after_evaluate_the_gallery_plots_score_against_ground_truth_and_draws_the_ground_truth(browser, run_kit):
    gallery = _evaluated_gallery(run_kit)
    browser.goto(gallery.as_uri() + "#page=p2")
    browser.wait_for("document.body.dataset.evaluation === '1' && "
                     "document.getElementById('viewer').dataset.page === 'p2'", timeout=10)
    assert browser.eval("document.getElementById('evaluation').hidden") is False
    # one dot per (page, name) with both numbers; ranked by the mean GT measure, the best marked
    assert browser.eval("document.querySelectorAll('#evaluation-plot circle').length") == 6
    names = browser.eval("Array.from(document.querySelectorAll('#evaluation-table tbody tr')).map(r => r.dataset.name)")
    assert names == ["v1", "a/x", "b/y"]                    # means 0.6, 0.55, 0.2
    assert browser.eval("document.querySelector('#evaluation-table tbody tr').className") == "best"
    assert "Rank correlation" in browser.eval("document.getElementById('evaluation-note').textContent")
    # the ground-truth layer of p2, on by default, its boxes in the GT image's pixels
    layer = "svg.layer[data-layer='ground truth']"
    assert browser.eval(f"document.querySelectorAll(\"{layer} rect\").length") == 2
    assert browser.eval(f"document.querySelector(\"{layer}\").getAttribute('viewBox')") == \
        f"0 0 {2 * run_kit.width} {2 * run_kit.height}"
    assert browser.eval("document.querySelector('#layers input[data-layer=\"ground truth\"]').checked") is True
    scores = browser.eval("document.getElementById('page-scores').innerText")
    assert "v1 iou_f1 (GT)" in scores and "best iou_f1 (GT)" in scores
    # p1 has no ground truth: no GT layer
    browser.eval("location.hash = '#page=p1'")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p1'", timeout=10)
    assert browser.eval(f"document.querySelectorAll(\"{layer}\").length") == 0
    assert browser.console_errors() == []


def test_a_page_with_a_transcript_offers_it_and_a_top_page_links_its_board(browser, run_kit):
    run = run_kit.build(summary=SUMMARY)
    text = run / "outputs" / "transcripts" / "v1" / "p2.txt"
    text.parent.mkdir(parents=True)
    text.write_text("Headline\n\nBody text of p2.\n")
    run_review(run, ["p1", "p2", "p3"], {"top_n": 1})
    browser.goto((run / "review" / "index.html").as_uri() + "#page=p2")
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p2'", timeout=10)
    assert browser.eval("document.getElementById('transcript').hidden") is False
    browser.eval("document.getElementById('transcript').open = true")
    browser.wait_for("document.getElementById('transcript-frame').getAttribute('src') !== null", timeout=10)
    assert browser.eval("document.getElementById('transcript-frame').getAttribute('src')") == \
        "../outputs/transcripts/v1/p2.txt"
    assert browser.eval("document.getElementById('viewer-board').hidden") is False
    assert browser.eval("document.getElementById('viewer-board').getAttribute('href')") == "top1_informative/pages/p2.png"
    browser.eval("location.hash = '#page=p1'")   # not a top page, no transcript
    browser.wait_for("document.getElementById('viewer').dataset.page === 'p1'", timeout=10)
    assert browser.eval("document.getElementById('transcript').hidden") is True
    assert browser.eval("document.getElementById('viewer-board').hidden") is True
    assert browser.console_errors() == []
