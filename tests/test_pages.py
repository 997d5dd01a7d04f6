import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from newsbag.errors import InputError
from newsbag.inputs import page_id_for, read_manifest_list
from newsbag.manifest import read_pages, select_shard
from newsbag.pages import build_pages, inspect_page

from nbtest import write_image, write_png16


def test_page_ids_are_unique_across_folders_and_extensions(tmp_path):
    root = tmp_path
    ids = {page_id_for(root / rel, root) for rel in ("issue1/p1.png", "issue2/p1.png", "issue1/p1.tif", "p1.png")}
    assert len(ids) == 4
    assert page_id_for(root / "issue1/p1.png", root).startswith("issue1__p1-")


def test_page_ids_are_stable_across_machines(tmp_path):
    a = page_id_for(tmp_path / "x" / "issue1/p1.png", tmp_path / "x")
    b = page_id_for(tmp_path / "y" / "issue1/p1.png", tmp_path / "y")
    assert a == b


@pytest.mark.parametrize("name,mode,fmt,save,expect_cache,note", [
    ("a.png", "L", "PNG", {}, False, ""),                        # 8-bit grey PNG passes through
    ("b.jpg", "RGB", "JPEG", {}, False, ""),                     # RGB JPEG passes through
    ("c.tif", "L", "TIFF", {}, False, ""),                       # 8-bit grey TIFF
    ("d.tif", "RGB", "TIFF", {"compression": "tiff_lzw"}, False, ""),  # RGB TIFF, LZW
    ("e.tif", "I;16", "TIFF", {}, True, "converted to 8-bit L"),  # 16-bit grey
    ("f.tif", "CMYK", "TIFF", {}, True, "converted to 8-bit RGB"),  # CMYK
    ("g.bmp", "RGB", "BMP", {}, True, "converted"),              # BMP gets a PNG copy
    ("h.webp", "RGB", "WEBP", {"lossless": True}, True, "converted"),  # WebP
    ("i.png", "1", "PNG", {}, True, "converted to 8-bit L"),     # bilevel
])
def test_image_kinds(tmp_path, name, mode, fmt, save, expect_cache, note):
    src = write_image(tmp_path / "in" / name, size=(64, 48), mode=mode, fmt=fmt, **save)
    rec = inspect_page(src, tmp_path / "in", tmp_path / "run")
    assert (rec.width, rec.height) == (64, 48)
    assert (Path(rec.image_path) != src.resolve()) == expect_cache
    assert note in rec.note
    with Image.open(rec.image_path) as im:
        assert im.mode in ("L", "RGB") and im.size == (64, 48)
        if mode == "I;16":  # 16-bit values scaled, not clipped: a gradient stays a gradient
            arr = np.asarray(im)
            assert arr.max() > 200 and arr.min() < 10
    assert (tmp_path / "run" / rec.path).resolve() == src.resolve()


def test_inspecting_a_touched_scan_again_leaves_its_cache_copy_as_it_was(tmp_path):
    """A touch makes the next call inspect the scan again; its 8-bit copy comes out the same
    and is kept (mtime, inode), so nothing made from the copy's identity is redone."""
    import os

    src = write_image(tmp_path / "in" / "e.tif", size=(64, 48), mode="I;16", fmt="TIFF")
    copy = Path(inspect_page(src, tmp_path / "in", tmp_path / "run").image_path)
    stamp = (copy.stat().st_mtime_ns, copy.stat().st_ino)
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 10**10))
    assert Path(inspect_page(src, tmp_path / "in", tmp_path / "run").image_path) == copy
    assert (copy.stat().st_mtime_ns, copy.stat().st_ino) == stamp

def test_16bit_rgb_tiff_read_with_tifffile(tmp_path):
    tifffile = pytest.importorskip("tifffile")
    arr = np.zeros((20, 30, 3), np.uint16)
    arr[..., 0] = 65535
    src = tmp_path / "in" / "rgb16.tif"
    src.parent.mkdir()
    tifffile.imwrite(src, arr, photometric="rgb")
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        assert im.mode == "RGB" and tuple(np.asarray(im)[0, 0]) == (255, 0, 0)



def _ramp(top: int, width: int = 64) -> np.ndarray:
    """A 48-row grey page whose every row runs 0..`top` (uint16)."""
    return np.tile(np.round(np.linspace(0, top, width)).astype(np.uint16), (48, 1))


def _ramp12() -> np.ndarray:
    """`_ramp(4095)` whose rows differ too: 12-bit values, and a misplaced row (Adam7) shows."""
    return (_ramp(4095) + np.arange(48, dtype=np.uint16)[:, None] * 37) % 4096


def _first_row(rec) -> np.ndarray:
    with Image.open(rec.image_path) as im:
        return np.asarray(im.convert("L"))[0].astype(int)


@pytest.mark.parametrize("fmt,suffix", [("TIFF", "tif"), ("PNG", "png")])
def test_a_12bit_page_in_16bit_samples_keeps_its_full_gradient_and_says_so(tmp_path, fmt, suffix):
    """12-bit scanner data (0..4095) in 16-bit samples was scaled by 65535: its 8-bit copy ran
    0..15, a nearly black page on which the models find nothing, passed on silently."""
    src = tmp_path / "in" / f"p12.{suffix}"
    src.parent.mkdir()
    Image.fromarray(_ramp(4095)).save(src, format=fmt)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert _first_row(rec).tolist() == (_ramp(4095)[0].astype(int) * 255 // 4095).tolist()
    assert "12-bit" in rec.note and "0..4095" in rec.note


@pytest.mark.parametrize("declared,top", [
    (4095, 200),    # a dark 12-bit page: its values (all under 256) are not taken for 8-bit ones
    (1023, 1023),   # a 10-bit scanner: 0..1023 is the page's full range
])
def test_a_tiff_declaring_its_max_sample_value_is_scaled_by_it(tmp_path, declared, top):
    """The TIFF's MaxSampleValue (tag 281) says which value is white; it was ignored."""
    tifffile = pytest.importorskip("tifffile")
    src = tmp_path / "in" / "declared.tif"
    src.parent.mkdir()
    tifffile.imwrite(src, _ramp(top), extratags=[(281, "H", 1, declared, True)])
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert _first_row(rec).tolist() == (_ramp(top)[0].astype(int) * 255 // declared).tolist()
    assert f"0..{declared}" in rec.note and "MaxSampleValue" in rec.note


def test_a_tiff_declaring_the_full_16bit_range_is_not_taken_for_12bit(tmp_path):
    """MaxSampleValue 65535 says 65535 is white: a dark page (values under 4096) stays dark; the
    declared maximum was dropped at 16 bits and the page stretched as 12-bit data."""
    tifffile = pytest.importorskip("tifffile")
    src = tmp_path / "in" / "declared16.tif"
    src.parent.mkdir()
    tifffile.imwrite(src, _ramp(3000), extratags=[(281, "H", 1, 65535, True)])
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert _first_row(rec).tolist() == (_ramp(3000)[0].astype(int) * 255 // 65535).tolist()
    assert "bit values" not in rec.note


def test_a_16bit_rgb_page_with_12bit_values_keeps_its_range(tmp_path):
    """The tifffile path (16-bit colour) follows the same rule as Pillow's pages."""
    tifffile = pytest.importorskip("tifffile")
    src = tmp_path / "in" / "rgb12.tif"
    src.parent.mkdir()
    tifffile.imwrite(src, np.repeat(_ramp(4095)[..., None], 3, -1), photometric="rgb")
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert _first_row(rec).tolist() == (_ramp(4095)[0].astype(int) * 255 // 4095).tolist()
    assert "12-bit" in rec.note


def test_a_uint32_tiff_keeps_its_upper_half(tmp_path):
    """Pillow reads a 32-bit unsigned TIFF as signed int32: values >= 2**31 came back negative and
    were clipped to black, so the brightest half of the page was black in its copy."""
    tifffile = pytest.importorskip("tifffile")
    src = tmp_path / "in" / "u32.tif"
    src.parent.mkdir()
    ramp = np.tile(np.linspace(0, 2**32 - 1, 64).astype(np.uint64), (48, 1)).astype(np.uint32)
    tifffile.imwrite(src, ramp)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    expected = (ramp[0].astype(np.float64) * 255 // (2**32 - 1)).astype(int)
    assert _first_row(rec).tolist() == expected.tolist() and expected[-1] == 255


@pytest.mark.parametrize("interlaced", [False, True])
@pytest.mark.parametrize("channels", [3, 4])   # RGB; RGBA (alpha dropped)
def test_a_16bit_colour_png_with_12bit_values_keeps_its_range(tmp_path, channels, interlaced):
    """Pillow reads a 16-bit colour PNG as 8-bit RGB by each sample's high byte: 12-bit scanner data
    lay in 0..15, and the page passed to the runners as it was, nearly black. It is decoded at 16
    bits and scaled as other deep pages are."""
    ramp = _ramp12()
    arr = np.stack([ramp, ramp[:, ::-1], np.full_like(ramp, 2000), np.full_like(ramp, 65535)][:channels], -1)
    src = write_png16(tmp_path / "in" / "rgb12.png", arr, interlaced)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert Path(rec.image_path) != src
    with Image.open(rec.image_path) as im:
        assert im.mode == "RGB"
        assert np.asarray(im).tolist() == (arr[..., :3].astype(int) * 255 // 4095).tolist()
    assert "PNG" in rec.note and "16-bit" in rec.note and "12-bit values (0..4095)" in rec.note


@pytest.mark.parametrize("interlaced", [False, True])
def test_a_16bit_grey_and_alpha_png_is_read_at_its_depth_not_refused_as_corrupt(tmp_path, interlaced):
    """A 16-bit grey+alpha PNG (colour type 4) is a valid scan: Pillow opens it as RGBA of each
    sample's high byte, and newsbag refused it as corrupt ('unrecognized data stream contents')
    while decoding its low bytes as 16-bit RGBA. Its grey is read at 16 bits and scaled as other
    deep pages are; the alpha is dropped, as for an 8-bit grey+alpha page."""
    ramp = _ramp12()
    src = write_png16(tmp_path / "in" / "la12.png", np.stack([ramp, np.full_like(ramp, 65535)], -1), interlaced)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        assert im.mode == "L"
        assert np.asarray(im).tolist() == (ramp.astype(int) * 255 // 4095).tolist()
    assert "PNG LA 16-bit" in rec.note and "12-bit values (0..4095)" in rec.note


@pytest.mark.parametrize("dtype, top", [(np.uint16, 65535), (np.uint16, 4095), (np.float32, 1.0),
                                        (np.float64, 1.0)])   # float64: read by tifffile
def test_a_deep_white_is_zero_tiff_is_not_turned_into_its_negative(tmp_path, dtype, top):
    """A TIFF whose PhotometricInterpretation is WhiteIsZero stores black as its largest value.
    Pillow inverts 1- and 8-bit ones but reads deeper ones as stored, so their copy was the page's
    negative (ink white on black) with nothing said. They are inverted after scaling, like the
    8-bit ones Pillow inverts, and the note says so."""
    tifffile = pytest.importorskip("tifffile")
    ink = np.zeros((48, 64), dtype)
    ink[10:20, 10:50] = top          # black ink on a white (zero) ground
    ink[30:40, 10:50] = top / 2 if np.dtype(dtype).kind == "f" else top // 2
    src = tmp_path / "in" / "mw.tif"
    src.parent.mkdir()
    tifffile.imwrite(src, ink, photometric="miniswhite")
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        page = np.asarray(im)
    assert page[0, 0] == 255 and page[15, 20] == 0 and 120 <= page[35, 20] <= 135
    assert "WhiteIsZero" in rec.note


def _write_ppm16(path: Path, rgb: np.ndarray, maxval: int = 65535) -> Path:
    """A binary 16-bit PPM (P6): big-endian samples after a text header, as SANE's scanimage writes."""
    h, w, _ = rgb.shape
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"P6\n%d %d\n%d\n" % (w, h, maxval) + rgb.astype(">u2").tobytes())
    return path


def test_a_16bit_ppm_with_12bit_values_keeps_its_range(tmp_path):
    """Pillow scales a 16-bit PPM (maxval 65535) to 8 bits by its maxval: 12-bit scanner data lay in
    0..15 and the page went to the runners nearly black, its note saying only 'converted'. It is read
    at 16 bits and scaled as other deep pages are."""
    ramp = _ramp12()
    rgb = np.stack([ramp, ramp[:, ::-1], np.full_like(ramp, 2000)], -1)
    src = _write_ppm16(tmp_path / "in" / "scan.ppm", rgb)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        assert im.mode == "RGB"
        assert np.asarray(im).tolist() == (rgb.astype(int) * 255 // 4095).tolist()
    assert "PPM RGB 16-bit" in rec.note and "12-bit values (0..4095)" in rec.note


def test_a_truncated_16bit_ppm_is_refused_in_one_line(tmp_path):
    src = _write_ppm16(tmp_path / "in" / "cut.ppm", np.full((48, 64, 3), 4000, np.uint16))
    src.write_bytes(src.read_bytes()[:-100])
    with pytest.raises(Exception) as err:
        inspect_page(src, src.parent, tmp_path / "run")
    assert str(src) in str(err.value) and "truncated" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("top", [65535, 20000])  # a full page, and a genuinely dark one (stays dark)
def test_an_ordinary_16bit_page_is_scaled_by_its_depth_not_its_content(tmp_path, top):
    src = tmp_path / "in" / "p16.tif"
    src.parent.mkdir()
    Image.fromarray(_ramp(top)).save(src)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert _first_row(rec).tolist() == (_ramp(top)[0].astype(int) * 255 // 65535).tolist()
    assert "bit values" not in rec.note and "0..65535" not in rec.note


def test_multipage_tiff_uses_first_page_and_says_so(tmp_path):
    src = tmp_path / "in" / "multi.tif"
    src.parent.mkdir()
    first = Image.new("L", (30, 20), 0)
    second = Image.new("L", (50, 40), 255)
    first.save(src, save_all=True, append_images=[second])
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert "2 frames" in rec.note and "first page" in rec.note
    assert (rec.width, rec.height) == (30, 20)
    with Image.open(rec.image_path) as im:
        assert np.asarray(im).max() == 0


@pytest.mark.parametrize("content,reason", [
    (b"", "not a readable image"),                                   # zero bytes
    (b"hello world, not an image", "not a readable image"),          # text with an image suffix
])
def test_bad_input_is_rejected_with_file_and_reason(tmp_path, content, reason):
    bad = tmp_path / "in" / "bad.png"
    bad.parent.mkdir()
    bad.write_bytes(content)
    with pytest.raises(InputError, match=reason) as err:
        inspect_page(bad, bad.parent, tmp_path / "run")
    assert str(bad) in str(err.value)


def test_truncated_image_is_rejected_and_batch_goes_on(tmp_path):
    good = write_image(tmp_path / "in" / "good.png")
    full = write_image(tmp_path / "in" / "trunc.png", size=(300, 300)).read_bytes()
    (tmp_path / "in" / "trunc.png").write_bytes(full[: len(full) // 2])
    pages, rejected = build_pages(tmp_path / "run", [tmp_path / "in"], None, False, None)
    assert [p.page_id.split("-")[0] for p in pages] == ["good"]
    assert len(rejected) == 1 and "trunc.png" in rejected[0].path and "decode" in rejected[0].error
    lines = (tmp_path / "run" / "manifests" / "rejected.jsonl").read_text().splitlines()
    assert "trunc.png" in json.loads(lines[0])["path"]
    assert good.exists()


def test_manifest_file_comments_and_relative_paths(tmp_path, page_dir):
    listing = tmp_path / "list.txt"
    listing.write_text("# my pages\npages/issue1/p1.png\n\n  pages/issue2/p1.png  # second\n")
    assert read_manifest_list(listing) == [tmp_path / "pages/issue1/p1.png", tmp_path / "pages/issue2/p1.png"]
    pages, rejected = build_pages(tmp_path / "run", [], listing, False, None)
    assert not rejected and len({p.page_id for p in pages}) == 2
    assert all(len(p.sha256) == 64 for p in pages)


def test_a_hash_inside_a_listed_name_is_part_of_the_name(tmp_path):
    """Archives name issues `Nr#12`: everything from the first `#` was cut as a comment, so
    `issue#12/p1.png` was looked up as `issue` and rejected as "file not found", and the scan lost.
    A comment starts a line or follows a space, as in a shell."""
    listing = tmp_path / "list.txt"
    listing.write_text("#all\nissue#12/p1.png\nissue#13/p1.png\t# a note\n  # indented\n")
    assert read_manifest_list(listing) == [tmp_path / "issue#12/p1.png", tmp_path / "issue#13/p1.png"]


def test_a_folder_in_a_page_list_is_named_as_a_folder(tmp_path):
    """A folder listed in --manifest was "cannot decode image: [Errno 21] Is a directory", kind corrupt."""
    write_image(tmp_path / "issue1" / "p1.png")
    listing = tmp_path / "list.txt"
    listing.write_text("issue1\nissue1/p1.png\n")
    pages, (r,) = build_pages(tmp_path / "run", [], listing, False, None)
    assert len(pages) == 1 and r.kind == "unreadable"
    assert r.error == f"{tmp_path / 'issue1'}: a folder, not an image (list its images, or give it as --input-dir)"


def test_a_listed_path_with_a_unicode_line_break_stays_one_path(tmp_path):
    """A list file's lines end at \n (or \r\n): a scan named with U+2028 or U+0085 is one path,
    as the manifest keeps it (`jsontext.jsonl_lines`), not two broken ones."""
    listing = tmp_path / "list.txt"
    listing.write_text("issue\u2028one/p1.png\r\nissue\x85two/p1.png\n", encoding="utf-8", newline="")
    assert read_manifest_list(listing) == [tmp_path / "issue\u2028one/p1.png", tmp_path / "issue\x85two/p1.png"]


def test_manifest_records_and_rerun_merges(tmp_path, page_dir):
    run = tmp_path / "run"
    first, _ = build_pages(run, [page_dir], None, True, 2)
    assert len(first) == 2
    second, _ = build_pages(run, [page_dir], None, True, None)
    assert len(second) == 5
    on_disk = read_pages(run)
    assert {p.page_id for p in on_disk} == {p.page_id for p in second}
    row = json.loads((run / "manifests" / "pages.jsonl").read_text().splitlines()[0])
    assert set(row) >= {"page_id", "path", "sha256", "width", "height"}
    assert not Path(row["path"]).is_absolute()


def test_an_id_does_not_depend_on_how_many_roots_a_call_names(tmp_path):
    write_image(tmp_path / "a" / "p1.png")
    write_image(tmp_path / "b" / "p2.png")
    (alone,), _ = build_pages(tmp_path / "run1", [tmp_path / "a"], None, False, None)
    both, _ = build_pages(tmp_path / "run2", [tmp_path / "a", tmp_path / "b"], None, False, None)
    assert alone.page_id in {p.page_id for p in both}
    assert sorted(p.page_id.split("-")[0] for p in both) == ["p1", "p2"]


def test_one_path_under_two_roots_is_refused_naming_both(tmp_path):
    write_image(tmp_path / "a" / "p1.png")
    write_image(tmp_path / "b" / "p1.png")
    with pytest.raises(InputError, match=r"a/p1.png and .*b/p1.png both get page id p1-.*--recursive"):
        build_pages(tmp_path / "run", [tmp_path / "b", tmp_path / "a"], None, False, None)
    build_pages(tmp_path / "run", [tmp_path / "a"], None, False, None)
    with pytest.raises(InputError, match="both get page id"):  # also against the run's manifest
        build_pages(tmp_path / "run", [tmp_path / "b"], None, False, None)
    assert not (tmp_path / "run" / "cache").exists()


def test_a_symlinked_input_is_named_by_its_own_path(tmp_path):
    real = write_image(tmp_path / "elsewhere" / "deep" / "scan.png")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p7.png").symlink_to(real)
    (page,), _ = build_pages(tmp_path / "run", [tmp_path / "in"], None, False, None)
    assert page.page_id.startswith("p7-") and page.page_id == page_id_for(tmp_path / "in" / "p7.png", tmp_path / "in")
    assert page.path.endswith("in/p7.png")


def test_a_manifest_entry_outside_its_folder_has_no_absolute_path_in_its_id(tmp_path):
    img = write_image(tmp_path / "data" / "scans" / "p9.png")
    listing = tmp_path / "lists" / "l.txt"
    listing.parent.mkdir()
    listing.write_text(f"{img}\n")
    (page,), _ = build_pages(tmp_path / "run", [], listing, False, None)
    assert page.page_id.startswith("p9-") and "up_" not in page.page_id and "data" not in page.page_id


def test_two_jobs_adding_different_folders_at_once_lose_nothing(tmp_path):
    """Each job inspects slowly, so both read the manifest before either writes it."""
    import subprocess
    import sys

    for folder in ("a", "b"):
        for k in range(4):
            write_image(tmp_path / folder / f"{folder}{k}.png")
    run = tmp_path / "run"
    script = (
        "import sys, time; from pathlib import Path; import newsbag.pages as P\n"
        "real = P.inspect_page\n"
        "P.inspect_page = lambda *a, **k: (time.sleep(0.3), real(*a, **k))[1]\n"
        "P.build_pages(Path(sys.argv[1]), [Path(sys.argv[2])], None, False, None)\n"
    )
    jobs = [subprocess.Popen([sys.executable, "-c", script, str(run), str(tmp_path / f)]) for f in ("a", "b")]
    assert [j.wait() for j in jobs] == [0, 0]
    assert sorted(p.page_id.split("-")[0] for p in read_pages(run)) == [f"{f}{k}" for f in "ab" for k in range(4)]


def test_select_shard_partitions_pages(tmp_path, page_dir):
    pages, _ = build_pages(tmp_path / "run", [page_dir], None, True, None)
    shards = [select_shard(pages, (k, 3)) for k in range(3)]
    assert sorted(p.page_id for s in shards for p in s) == sorted(p.page_id for p in pages)
    assert [len(s) for s in shards] == [2, 2, 1]


def test_a_run_directory_inside_the_input_folder_is_not_read_as_pages(tmp_path):
    """`--input-dir scans --recursive --run-dir scans/run`: the boards, scans and cache copies the
    run writes used to come back as new pages on every rerun (1, then 4, then 14 pages...)."""
    root = tmp_path / "scans"
    write_image(root / "issue1" / "p1.png")
    run = root / "run"
    build_pages(run, [root], None, True, None)
    write_image(run / "review" / "pages" / "issue1__p1-x" / "board.png")  # what the stages leave
    write_image(run / "cache" / "images" / "issue1__p1-x.png")
    older = root / "issue1" / "older-run"  # another run of these scans, kept beside them
    build_pages(older, [root / "issue1"], None, False, None)
    write_image(older / "review" / "pages" / "p1-y" / "board.png")
    pages, rejected = build_pages(run, [root], None, True, None)
    assert [p.path for p in pages] == ["../issue1/p1.png"] and not rejected
    assert [p.path for p in read_pages(run)] == ["../issue1/p1.png"]


def test_a_rerun_over_unchanged_inputs_names_each_once_and_rewrites_nothing(tmp_path, page_dir, monkeypatch):
    """`newsbag pages` again over 100k unchanged scans (a resubmit runs it) computed each page's
    id three times and resolved each path three times (a realpath is a stat per path part), then
    rewrote the whole manifest: ~20 s. Each input is named once, resolved only where two paths
    meet under one id, no image is opened or hashed, and the manifest is left as it is."""
    import os

    from newsbag import inputs
    from newsbag import pages as pages_mod
    from newsbag.freshness import file_identity

    run = tmp_path / "run"
    first, _ = build_pages(run, [page_dir], None, True, None)
    manifest = run / "manifests" / "pages.jsonl"
    written = file_identity(manifest)
    named, resolved, inspected = [], [], []
    real_id, real_realpath, real_inspect = inputs.page_id_for, os.path.realpath, pages_mod.inspect_page
    monkeypatch.setattr(inputs, "page_id_for", lambda path, root: named.append(path) or real_id(path, root))
    monkeypatch.setattr(os.path, "realpath", lambda path, **k: (
        resolved.append(path) if str(path).endswith(".png") else None) or real_realpath(path, **k))
    monkeypatch.setattr(pages_mod, "inspect_page", lambda *a, **k: inspected.append(a) or real_inspect(*a, **k))
    again, rejected = build_pages(run, [page_dir], None, True, None)
    assert again == first and not rejected
    assert sorted(named) == sorted(set(named)) and len(named) == len(first)
    assert resolved == [] and inspected == []
    assert file_identity(manifest) == written


def test_a_scan_named_with_a_unicode_line_break_keeps_the_manifest_readable(tmp_path):
    """The manifest is UTF-8 JSON lines (ensure_ascii off), so a name holding U+2028 or U+0085
    is written as it is; readers split with str.splitlines, which breaks lines there too: every
    later call failed on 'bad manifest line', and its rejected.jsonl row vanished."""
    from newsbag.manifest import manifest_page_ids, read_rejected

    for name in ("issue\u2028one.png", "issue\x85two.png", "plain.png"):
        write_image(tmp_path / "in" / name)
    (tmp_path / "in" / "broken\u2028scan.png").write_bytes(b"not a png")
    run = tmp_path / "run"
    pages, rejected = build_pages(run, [tmp_path / "in"], None, False, None)
    assert len(pages) == 3 and len(rejected) == 1
    assert read_pages(run) == pages
    assert manifest_page_ids(run) == [p.page_id for p in pages]
    assert read_rejected(run) == rejected


@pytest.mark.parametrize("name,mode,fmt,save", [
    ("a.png", "L", "PNG", {}),                          # passes through
    ("e.tif", "I;16", "TIFF", {}),                      # converted: decoded in full
    ("m.tif", "RGB", "TIFF", {"compression": "tiff_lzw", "tiffinfo": {274: 6}}),  # LZW, turned upright on load
])
def test_a_new_page_is_read_once_and_a_large_one_is_hashed_streaming(tmp_path, monkeypatch, name, mode, fmt, save):
    """`newsbag pages` hashes and decodes a page from the same bytes (it read the file twice,
    ~4 % of inspecting a page); a file over `images.READ_ONCE_MAX_BYTES` is decoded from the
    file and hashed from a second, streaming read rather than held whole in memory. Both ways
    record the same page."""
    import builtins
    import hashlib

    from newsbag import images

    src = write_image(tmp_path / "in" / name, size=(64, 48), mode=mode, fmt=fmt, **save)
    real_open, opens = builtins.open, []

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file).resolve() == src.resolve():
            opens.append(args[0] if args else kwargs.get("mode", "r"))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    once = inspect_page(src, tmp_path / "in", tmp_path / "run")
    assert len(opens) == 1, opens
    assert once.sha256 == hashlib.sha256(src.read_bytes()).hexdigest()
    opens.clear()
    monkeypatch.setattr(images, "READ_ONCE_MAX_BYTES", src.stat().st_size - 1)
    twice = inspect_page(src, tmp_path / "in", tmp_path / "run2")
    assert len(opens) >= 2, opens   # decoded from the file (Pillow maps an uncompressed one: a third), then hashed
    assert asdict(twice) == {**asdict(once), "image_path": twice.image_path}
    if once.image_path != str(src):   # the 8-bit copy: the same pixels either way
        assert Path(once.image_path).read_bytes() == Path(twice.image_path).read_bytes()


def test_a_page_that_grew_past_the_read_once_size_since_its_stat_is_not_read_whole(tmp_path, monkeypatch):
    """A scan still being copied in can be larger by the time it is read than its stat said: the
    read stops past `READ_ONCE_MAX_BYTES` and the page is decoded from the file, hashed streaming."""
    import hashlib

    from newsbag import images, pages

    src = write_image(tmp_path / "in" / "a.png", size=(64, 48))
    size = src.stat().st_size
    monkeypatch.setattr(images, "READ_ONCE_MAX_BYTES", size // 2)
    real_identity = pages.freshness.file_identity
    monkeypatch.setattr(pages.freshness, "file_identity", lambda path: [1, real_identity(path)[1]])  # stat'ed small
    reads = []
    real_open = open

    class Recording:
        def __init__(self, fh):
            self.fh = fh

        def read(self, n=-1):
            data = self.fh.read(n)
            reads.append(len(data))
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    monkeypatch.setattr(images, "open", lambda file, mode="r": Recording(real_open(file, mode)), raising=False)
    rec = inspect_page(src, tmp_path / "in", tmp_path / "run")
    assert reads[0] == size // 2 + 1   # the read meant to be the only one stops one byte past the limit
    assert rec.sha256 == hashlib.sha256(src.read_bytes()).hexdigest() and (rec.width, rec.height) == (64, 48)


NFC, NFD = "Z\u00fcrich/Ausgabe-\u00e9t\u00e9.png", "Zu\u0308rich/Ausgabe-e\u0301te\u0301.png"  # one visible name


def test_a_name_gets_one_page_id_whether_spelt_nfc_or_nfd(tmp_path):
    """A folder copied from a Mac holds NFD names, the same visible names NFC elsewhere: they gave
    two page ids, so the same scan was a new page in each copy."""
    assert NFC != NFD
    assert page_id_for(tmp_path / NFC, tmp_path) == page_id_for(tmp_path / NFD, tmp_path)


@pytest.mark.parametrize("before,after", [(NFD, NFC), (NFC, NFD)])
def test_a_run_resumes_after_its_scans_come_back_in_the_other_normalisation(tmp_path, monkeypatch, before, after):
    """rsync from a Mac turns NFD names NFC (or back): the rerun found every page new, redid them
    all and kept the old ones in the manifest beside them. The page keeps its id and hash, the
    manifest its path as it is now, once."""
    import os

    write_image(tmp_path / "in" / before)
    run = tmp_path / "run"
    (first,), _ = build_pages(run, [tmp_path / "in"], None, True, None)
    os.rename(tmp_path / "in" / before.split("/")[0], tmp_path / "in" / after.split("/")[0])
    os.rename(tmp_path / "in" / after.split("/")[0] / before.split("/")[1],
              tmp_path / "in" / after.split("/")[0] / after.split("/")[1])
    (again,), rejected = build_pages(run, [tmp_path / "in"], None, True, None)
    assert not rejected
    assert (again.page_id, again.image_sha256) == (first.page_id, first.image_sha256)
    assert [(p.page_id, p.path) for p in read_pages(run)] == [(first.page_id, os.path.join("..", "in", after))]


def test_two_scans_whose_names_differ_only_in_normalisation_are_refused_naming_both(tmp_path):
    """Linux keeps an NFC and an NFD name side by side as two files: they are not merged into one
    page; both are refused, each naming the other and the fix, and the other pages go on."""
    write_image(tmp_path / "in" / "Z\u00fcrich" / "p\u00e9.png", size=(40, 30))
    write_image(tmp_path / "in" / "Z\u00fcrich" / "pe\u0301.png", size=(50, 30))
    write_image(tmp_path / "in" / "Z\u00fcrich" / "other.png")
    found, rejected = build_pages(tmp_path / "run", [tmp_path / "in"], None, True, None)
    assert [p.path.rsplit("/", 1)[-1] for p in found] == ["other.png"]
    assert sorted(r.path.rsplit("/", 1)[-1] for r in rejected) == sorted(["p\u00e9.png", "pe\u0301.png"])
    for r in rejected:
        twin = next(o.path for o in rejected if o is not r)
        assert r.kind == "bad_name" and r.error.startswith(f"{r.path}: ") and twin in r.error
        assert "two Unicode normalisations" in r.error and "rename or remove one" in r.error
        assert r.error.count("(NFC)") + r.error.count("(NFD)") == 1
        assert ("NFC spelling" in r.error) != ("(NFC)" in r.error)


def test_a_manifest_rewritten_through_a_linked_run_dir_still_names_the_copy_run_relative(tmp_path):
    """A run dir named through a symlink (a scratch link to the real disk): the manifest read back
    and written again (every merge does) keeps its 8-bit copies run-relative, so the run can still
    be moved. It wrote them absolute, by the link's path, once a merge had read them back."""
    from newsbag.manifest import write_pages

    src = write_image(tmp_path / "in" / "e.tif", size=(64, 48), mode="I;16", fmt="TIFF")
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    build_pages(link, [tmp_path / "in"], None, False, None)
    write_pages(link, read_pages(link))
    stored = json.loads((link / "manifests" / "pages.jsonl").read_text())["image_path"]
    assert stored == str(Path("cache") / "images" / f"{page_id_for(src, tmp_path / 'in')}.png")


@pytest.mark.parametrize("every", [{"CHECKPOINT_PAGES": 3}, {"CHECKPOINT_S": 0.0}])  # N pages / a time limit
def test_an_interrupted_inspection_keeps_what_it_inspected(tmp_path, monkeypatch, every):
    """The manifest was written only once every input was inspected (hashed, decoded, converted):
    a call killed at 85 % left nothing, and a job whose time limit is shorter than the whole
    inspection never finished. Inspected pages are checkpointed into the manifest, so a rerun
    inspects only the rest and writes the manifest a clean call writes."""
    from newsbag import pages as pages_mod

    for i in range(10):
        write_image(tmp_path / "in" / f"p{i}.png", size=(20, 10), mode="RGB" if i % 2 else "I;16")  # some get a copy
    for name, value in every.items():
        monkeypatch.setattr(pages_mod, name, value, raising=False)
    real_inspect = pages_mod.inspect_page
    inspected = []

    def killed_at_the_8th(*args, **kwargs):
        if len(inspected) == 7:
            raise KeyboardInterrupt
        inspected.append(args[0])
        return real_inspect(*args, **kwargs)

    run = tmp_path / "run"
    monkeypatch.setattr(pages_mod, "inspect_page", killed_at_the_8th)
    with pytest.raises(KeyboardInterrupt):
        build_pages(run, [tmp_path / "in"], None, False, None)
    kept = 6 if "CHECKPOINT_PAGES" in every else 7
    assert [Path(p.path).name for p in read_pages(run)] == [f"p{i}.png" for i in range(kept)]
    inspected.clear()
    monkeypatch.setattr(pages_mod, "inspect_page", lambda *a, **k: inspected.append(a[0]) or real_inspect(*a, **k))
    pages, _ = build_pages(run, [tmp_path / "in"], None, False, None)
    assert [p.name for p in inspected] == [f"p{i}.png" for i in range(kept, 10)]
    clean = tmp_path / "clean"
    assert [p.page_id for p in pages] == [p.page_id for p in build_pages(clean, [tmp_path / "in"], None, False, None)[0]]
    assert (run / "manifests" / "pages.jsonl").read_text() == (clean / "manifests" / "pages.jsonl").read_text()
