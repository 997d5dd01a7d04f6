"""`_regions.clean_regions`: what a runner writes, the reader takes as it is."""

from __future__ import annotations

from pathlib import Path

from newsbag.page_repair import repair_regions


def test_a_box_kept_by_the_runner_is_not_dropped_by_the_reader_after_rounding():
    """The runner rounds coordinates to 2 decimals; a box is tested by the 1-px rule as written,
    as the reader's repair (`page_repair.repair_regions`) tests it, so the reader never drops what
    a runner wrote: 3.847..4.8482 is 1.0012 wide, but 3.85..4.85 is 0.9999999999999996 in floats."""
    import _regions

    regions = [{"bbox_xyxy": [3.847, 5.0, 4.8482, 30.0], "label": "text"},    # under 1 px once rounded
               {"bbox_xyxy": [10.0, 5.0, 11.0, 30.0], "label": "text"},       # exactly 1 px: kept
               {"bbox_xyxy": [10.0, 5.0, 10.5, 30.0], "label": "text"}]       # half a pixel: dropped
    out, warnings = _regions.clean_regions(regions, 100, 100, {"text": "text"})
    assert [r["bbox_xyxy"] for r in out] == [[10.0, 5.0, 11.0, 30.0]]
    assert warnings == {"degenerate_box": 2}
    page = {"page_id": "p", "image": {"path": "p.png", "width": 100, "height": 100},
            "source": {"stage": "s", "variant": "v", "family": "s", "model": "m", "device": "cpu"},
            "regions": [{**r, "score": None, "order": None, "text": None} for r in out], "seconds": 0.0}
    repaired, counts = repair_regions(page)
    assert counts == {} and repaired["regions"] == page["regions"]


def test_a_recognised_line_is_written_with_its_keys_in_one_order_whatever_the_hash_seed():
    # The page is compared as bytes before it is written again: keys in a set's order (which
    # follows the process's hash seed) rewrote an unchanged page on about half of the reruns.
    import subprocess
    import sys

    import _regions

    code = ("import _regions, json; print(json.dumps(list(_regions.clean_regions([{'bbox_xyxy': [0, 0, 9, 9], "
            "'label': 't', 'model': 'eng', 'words': []}], 10, 10, {'t': 't'})[0][0])))")
    orders = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={"PYTHONHASHSEED": str(seed), "PYTHONPATH": str(Path(_regions.__file__).parent)}
                             ).stdout for seed in range(1, 9)}
    assert len(orders) == 1
