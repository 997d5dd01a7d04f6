"""Correction bundles (`suggest`, `export --bundle`): image and PAGE-XML side by side, a METS file, list.tsv."""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from pathlib import Path

import pytest
from lxml import etree

from nbtest import run_cli, write_image, write_manifest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from xsd import PAGE_XSD, validation_errors  # noqa: E402

from newsbag.export.bundle import LIST_COLUMNS, bundle_basenames, write_bundle  # noqa: E402
from newsbag.export.mets import IMAGE_GROUP, PAGE_GROUP, PAGE_MIMETYPE  # noqa: E402
from newsbag.manifest import PageRecord  # noqa: E402

W, H = 300, 400
PAGE = {"pc": "http://schema.primaresearch.org/PAGE/gts/pagecontent/2019-07-15"}
METS = {"mets": "http://www.loc.gov/METS/", "xlink": "http://www.w3.org/1999/xlink",
        "mods": "http://www.loc.gov/mods/v3"}
# (input path under the input root, page id, the review's source disagreement)
PAGES = [("nzz_18010922_p1.png", "nzz_18010922_p1-00000001", 0.9),
         ("nzz_18010922_p2.png", "nzz_18010922_p2-00000002", 0.85),
         ("nzz_18010922_p3.png", "nzz_18010922_p3-00000003", 0.8),
         ("nzz_18500105_p1.png", "nzz_18500105_p1-00000004", 0.4),
         ("nzz_19000310_p1.png", "nzz_19000310_p1-00000005", 0.3)]


def _regions(k: int) -> list[dict]:
    return [{"bbox_xyxy": [10 + 100 * c, 20, 90 + 100 * c, 300], "label": "text", "class": "text", "score": 0.8,
             "order": c, "support": ["a/x"], "members": []} for c in range(k)]


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


@pytest.fixture
def run(tmp_path) -> Path:
    """Five fused pages (variant V, recommended), their PNG originals, and the review's scores.tsv."""
    run = tmp_path / "run"
    rows = []
    for k, (rel, page_id, _) in enumerate(PAGES):
        image = write_image(tmp_path / "scans" / rel, size=(W, H), mode="RGB")
        _write(run / "outputs" / "fusion" / "V" / f"{page_id}.json",
               {"page_id": page_id, "image": {"path": str(image), "width": W, "height": H},
                "source": {"stage": "fusion", "variant": "V", "family": "fusion"}, "regions": _regions(1 + k % 3),
                "seconds": 0.0})
        rows.append({"page_id": page_id, "path": f"../scans/{rel}", "image_path": str(image), "width": W,
                     "height": H, "sha256": ""})
    _write(run / "outputs" / "fusion" / "summary.json",
           {"recommended_variant": "V", "variants": {"V": {"method": "consensus"}}})
    write_manifest(run, rows)
    scores = ["rank\tpage_id\tstatus\treview_priority\tsource_disagreement"]
    scores += [f"{k}\t{pid}\tok\t{d}\t{d}" for k, (_, pid, d) in enumerate(PAGES, 1)]
    (run / "review").mkdir()
    (run / "review" / "scores.tsv").write_text("\n".join(scores) + "\n")
    return run


def _list(folder: Path) -> list[dict]:
    with open(folder / "list.tsv", encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def _check_bundle(folder: Path, scans: Path) -> list[dict]:
    """The bundle's invariants: each PAGE-XML valid and naming its sibling image, which holds the
    original's bytes; the METS well-formed, every file it names present, one page div per page."""
    rows = _list(folder)
    for row in rows:
        xml = folder / row["xml"]
        assert Path(row["xml"]).stem == Path(row["image"]).stem
        assert validation_errors(xml, PAGE_XSD) == []
        page = etree.parse(str(xml)).getroot().find("pc:Page", PAGE)
        assert page.get("imageFilename") == row["image"]
        original = next(scans.glob(f"{Path(row['image']).stem}.*"))
        assert (folder / row["image"]).read_bytes() == original.read_bytes()
    mets = etree.parse(str(folder / "mets.xml")).getroot()
    groups = {g.get("USE"): g for g in mets.iterfind(".//mets:fileGrp", METS)}
    assert set(groups) == {IMAGE_GROUP, PAGE_GROUP}
    hrefs = {g: [f.find("mets:FLocat", METS).get(f"{{{METS['xlink']}}}href") for f in groups[g]] for g in groups}
    assert hrefs[IMAGE_GROUP] == [r["image"] for r in rows] and hrefs[PAGE_GROUP] == [r["xml"] for r in rows]
    assert all((folder / h).is_file() for names in hrefs.values() for h in names)
    assert {f.get("MIMETYPE") for f in groups[PAGE_GROUP]} == {PAGE_MIMETYPE}
    divs = mets.findall(".//mets:structMap[@TYPE='PHYSICAL']/mets:div[@TYPE='physSequence']/mets:div", METS)
    assert [d.get("ORDER") for d in divs] == [str(k) for k in range(1, len(rows) + 1)]
    # a PAGE file's ID is its pcGtsId, as OCR-D's workspace validator asks
    pcgts = [etree.parse(str(folder / r["xml"])).getroot().get("pcGtsId") for r in rows]
    assert [f.get("ID") for f in groups[PAGE_GROUP]] == pcgts
    assert [[p.get("FILEID") for p in d] for d in divs] == [[f"{IMAGE_GROUP}_{k:04d}", pcgts[k - 1]]
                                                           for k in range(1, len(rows) + 1)]
    assert mets.find(".//mods:identifier[@type='urn']", METS).text.startswith("urn:newsbag:")
    return rows


def test_suggest_writes_a_bundle_spread_over_issues(run, capsys):
    code, out, err = run_cli(capsys, "suggest", "--run-dir", run, "-n", "3")
    assert code == 0, err
    rows = _check_bundle(run / "corrections", run.parent / "scans")
    # the loudest page of issue 1801-09-22, then one page each of the other two issues, although
    # two more pages of the first disagree more (0.85, 0.8 against 0.4 and 0.3)
    assert [r["page_id"] for r in rows] == [PAGES[0][1], PAGES[3][1], PAGES[4][1]]
    assert [r["issue"] for r in rows] == ["1801-09-22", "1850-01-05", "1900-03-10"]
    assert [float(r["disagreement"]) for r in rows] == [PAGES[0][2], PAGES[3][2], PAGES[4][2]]
    assert [r["image"] for r in rows] == ["nzz_18010922_p1.png", "nzz_18500105_p1.png", "nzz_19000310_p1.png"]
    assert "review source disagreement" in out and PAGES[3][1] in out


def test_suggest_json_and_out(run, capsys, tmp_path):
    code, out, _ = run_cli(capsys, "suggest", "--run-dir", run, "-n", "2", "--out", tmp_path / "mine", "--json")
    assert code == 0
    payload = json.loads(out)
    assert payload["measure"] == "review" and payload["bundle"] == str(tmp_path / "mine")
    assert [p["page_id"] for p in payload["pages"]] == [PAGES[0][1], PAGES[3][1]]
    assert list(payload["pages"][0]) == list(LIST_COLUMNS)
    assert not (run / "corrections").exists()


def test_suggest_without_review_ranks_by_fusion_agreement(run, capsys):
    (run / "review" / "scores.tsv").unlink()
    table = ["page_id\tname\tfamily\tloo_box_agreement"]
    # page k: its two sources agree on 0.2*k and 0.2*k + 0.1 of their boxes
    table += [f"{pid}\t{s}\tf\t{0.2 * k + 0.1 * j}" for k, (_, pid, _) in enumerate(PAGES) for j, s in enumerate("ab")]
    (run / "outputs" / "fusion" / "per_page_source_metrics.tsv").write_text("\n".join(table) + "\n")
    code, out, _ = run_cli(capsys, "suggest", "--run-dir", run, "-n", "1", "--json")
    assert code == 0
    (pick,) = json.loads(out)["pages"]
    assert json.loads(out)["measure"] == "fusion"
    assert pick["page_id"] == PAGES[0][1] and pick["disagreement"] == pytest.approx(1 - 0.05)


def test_suggest_refuses_a_run_without_fusion(tmp_path, capsys):
    run = tmp_path / "empty"
    write_manifest(run, [])
    code, _, err = run_cli(capsys, "suggest", "--run-dir", run)
    assert code == 2
    assert "no recommended fused variant" in err and "run newsbag fuse first" in err


def test_export_bundle_writes_every_page(run, capsys):
    code, out, err = run_cli(capsys, "export", "--run-dir", run, "--bundle")
    assert code == 0, err
    rows = _check_bundle(run / "exports" / "bundle", run.parent / "scans")
    assert [r["page_id"] for r in rows] == [pid for _, pid, _ in PAGES]
    assert not (run / "exports" / "page-xml").exists()


@pytest.mark.parametrize("args, message", [
    (["--format", "alto"], "leave out --format"),
    (["--variant", "V", "--variant", "W"], "name one variant"),
    (["--variant", "all"], "name one variant"),
])
def test_export_bundle_refuses(run, capsys, args, message):
    code, _, err = run_cli(capsys, "export", "--run-dir", run, "--bundle", *args)
    assert code == 2 and message in err


def test_rewrite_keeps_corrections_and_drops_stale_pages(run):
    folder = run / "b"
    ids = [pid for _, pid, _ in PAGES]
    write_bundle(run, folder, ids[:3])
    corrected = folder / "nzz_18010922_p1.xml"
    corrected.write_bytes(corrected.read_bytes().replace(b"</PcGts>", b"<!-- fixed --></PcGts>"))
    untouched = (folder / "nzz_18010922_p2.xml").stat().st_mtime_ns
    result = write_bundle(run, folder, [ids[0], ids[1], ids[3]])   # p3 no longer, 1850 new
    assert result.kept == [ids[0]]
    assert b"fixed" in corrected.read_bytes()
    assert (folder / "nzz_18010922_p2.xml").stat().st_mtime_ns == untouched   # same bytes: not rewritten
    assert not (folder / "nzz_18010922_p3.xml").exists() and not (folder / "nzz_18010922_p3.png").exists()
    rows = _list(folder)
    assert [r["page_id"] for r in rows] == [ids[0], ids[1], ids[3]]
    # the corrected file keeps the hash newsbag wrote, so the next write still knows it corrected
    assert rows[0]["xml_sha256"] != hashlib.sha256(corrected.read_bytes()).hexdigest()
    assert write_bundle(run, folder, [ids[0]]).kept == [ids[0]]


def test_a_page_that_cannot_be_read_is_left_out(run, capsys):
    (run / "outputs" / "fusion" / "V" / f"{PAGES[1][1]}.json").write_text("{")
    code, _, err = run_cli(capsys, "export", "--run-dir", run, "--bundle")
    assert code == 4
    assert f"page {PAGES[1][1]}" in err
    assert [r["page_id"] for r in _list(run / "exports" / "bundle")] == [pid for k, (_, pid, _) in enumerate(PAGES)
                                                                         if k != 1]


def _record(path: str, page_id: str) -> PageRecord:
    return PageRecord(page_id, path, path, 1, 1, "", conversion=1)


@pytest.mark.parametrize("paths, expected", [
    # unique stems: the stem (odd characters made _)
    ([("in/a b.png", "a_b-1"), ("in/c.tif", "c-2")], ["a_b", "c"]),
    # one stem twice in two folders: the readable page id (folders joined by __)
    ([("in/i1/p1.png", "i1__p1-1"), ("in/i2/p1.png", "i2__p1-2"), ("in/i2/p2.png", "i2__p2-3")],
     ["i1__p1", "i2__p1", "p2"]),
    # stems that differ in case only, and a file that would be named mets.xml
    ([("in/P1.png", "P1-1"), ("in/x/p1.png", "x__p1-2"), ("in/mets.png", "mets-3")], ["P1", "x__p1", "mets-3"]),
])
def test_bundle_basenames(paths, expected):
    records = [_record(p, pid) for p, pid in paths]
    assert list(bundle_basenames(records).values()) == expected


@pytest.mark.parametrize("copy_sha256, orientation, original_there, expected", [
    (None, 1, True, "original"),       # a format the tools read, stored upright: its own bytes
    ("ab", 1, True, "copy"),           # 16-bit, palette, odd format: the run's 8-bit PNG copy
    (None, 6, True, "copy"),           # stored turned: the upright copy the boxes fit
    (None, 1, False, "copy"),          # the original moved away: what the runners read
])
def test_bundle_image(tmp_path, copy_sha256, orientation, original_there, expected):
    from newsbag.export.bundle import bundle_image

    run = tmp_path / "run"
    original = tmp_path / "scans" / "p.tif"
    copy = run / "cache" / "images" / "p-1.png"
    run.mkdir()
    if original_there:
        write_image(original)
    record = PageRecord("p-1", "../scans/p.tif", str(copy), 1, 1, "", orientation=orientation,
                        copy_sha256=copy_sha256, conversion=1)
    got = bundle_image(run, record)
    assert got == (run / "../scans/p.tif" if expected == "original" else copy)


def test_a_rewrite_copies_an_image_again_only_when_it_changed(run):
    folder = run / "b"
    ids = [pid for _, pid, _ in PAGES]
    write_bundle(run, folder, ids[:2])
    copy, original = folder / "nzz_18010922_p1.png", run.parent / "scans" / "nzz_18010922_p1.png"
    assert copy.stat().st_mtime_ns == original.stat().st_mtime_ns
    inode = copy.stat().st_ino
    write_bundle(run, folder, ids[:2])
    assert copy.stat().st_ino == inode   # same size and time: not copied again
    write_image(original, size=(W, H), mode="L")   # the scan replaced
    write_bundle(run, folder, ids[:2])
    assert copy.read_bytes() == original.read_bytes()
