"""Bad, huge, rotated and odd inputs: bounded, named with their reason, or normalised (issue #11)."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from newsbag.errors import InputError
from newsbag.images import InputLimits
from newsbag.inputs import read_manifest_list
from newsbag.manifest import read_pages, read_rejected
from newsbag.pages import build_pages, inspect_page

from nbtest import FAKE_RUNNERS, REPO, run_cli, write_image


def png_bomb(w: int, h: int) -> bytes:
    """A valid 1-bit PNG of w x h zeros, built in milliseconds: identical deflate blocks (a full
    flush resets the dictionary) repeated, with the Adler-32 of all-zero data."""
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    row = b"\x00" * (1 + (w + 7) // 8)
    per_block = max(1, min(h, (1 << 20) // len(row)))
    n_blocks, rest = divmod(h, per_block)
    c = zlib.compressobj(9)
    block = row * per_block
    head = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    mid = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
    last = c.compress(row * rest) + c.flush()
    adler = (((len(row) * h) % 65521) << 16) | 1
    stream = head + mid * (n_blocks - 1) + last[:-4] + struct.pack(">I", adler)
    ihdr = struct.pack(">IIBBBBB", w, h, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", stream) + chunk(b"IEND", b"")


def rotated_jpeg(path: Path, orientation: int = 6) -> Path:
    """A JPEG stored 150 wide x 100 high whose EXIF says: rotate for display (6: 90 deg clockwise).

    Upright (as viewers show it) the page is 100 x 150 with a black square at its top-left.
    """
    upright = np.full((150, 100), 255, np.uint8)
    upright[:30, :30] = 0
    stored = Image.fromarray(upright).transpose(Image.Transpose.ROTATE_90)  # undo of orientation 6
    exif = Image.Exif()
    exif[0x0112] = orientation
    path.parent.mkdir(parents=True, exist_ok=True)
    stored.save(path, format="JPEG", exif=exif, quality=95)
    return path


# --- the header limits --------------------------------------------------------------------


def test_bomb_is_refused_from_its_header_in_under_a_second_and_without_a_big_allocation(tmp_path):
    bomb = tmp_path / "in" / "bomb.png"
    bomb.parent.mkdir()
    bomb.write_bytes(png_bomb(40000, 40000))  # 198 KB declaring 1.6 gigapixels
    probe = (
        "import resource, sys, time\n"
        "from pathlib import Path\n"
        "from newsbag.pages import inspect_page\n"
        "from newsbag.errors import InputError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "t0 = time.perf_counter()\n"
        "try:\n"
        "    inspect_page(Path(sys.argv[1]), Path(sys.argv[1]).parent, Path(sys.argv[2]))\n"
        "    print('ACCEPTED')\n"
        "except InputError as exc:\n"
        "    print('REFUSED', exc)\n"
        "print('SECONDS', time.perf_counter() - t0)\n"
        "print('GROWTH_MB', (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(bomb), str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120).stdout
    facts = dict(line.split(" ", 1) for line in out.splitlines())
    assert "REFUSED" in facts, out
    assert "declares 40000x40000 = 1600 MP, over the 400 MP limit" in facts["REFUSED"]
    assert float(facts["SECONDS"]) < 1.0, out
    assert float(facts["GROWTH_MB"]) < 50, out  # a decode would take 1600 MB (1-bit: 200 MB)


def test_a_16bit_page_is_made_8bit_in_a_few_bytes_per_pixel(tmp_path):
    """A 16-bit grey master (common in archives) used to cost ~25 bytes per pixel to convert
    (int64 copies of the page): 1 GB for 40 MP, ~10 GB at the 400 MP limit."""
    h, w = 3000, 4000
    deep = (np.arange(h * w, dtype=np.uint32).reshape(h, w) * 7 % 65536).astype(np.uint16)
    page = tmp_path / "in" / "deep.tif"
    page.parent.mkdir()
    Image.fromarray(deep).save(page, compression="tiff_lzw")
    probe = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from newsbag.pages import inspect_page\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "rec = inspect_page(Path(sys.argv[1]), Path(sys.argv[1]).parent, Path(sys.argv[2]))\n"
        "print('GROWTH_MB', (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)\n"
        "print('CACHE', rec.image_path)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(page), str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=120)
    facts = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert float(facts["GROWTH_MB"]) < 8 * h * w / 2**20, out  # 92 MB; it took ~290
    with Image.open(facts["CACHE"]) as im:
        assert im.mode == "L" and np.array_equal(np.asarray(im), (deep.astype(np.int64) * 255 // 65535).astype(np.uint8))


def test_pixel_limit_is_an_option(tmp_path):
    page = write_image(tmp_path / "in" / "p.png", size=(400, 300))
    with pytest.raises(InputError, match=r"over the 0.1 MP limit; if it is a real scan, rerun with --max-megapixels"):
        inspect_page(page, page.parent, tmp_path / "run", InputLimits.from_megapixels(0.1))
    assert inspect_page(page, page.parent, tmp_path / "run", InputLimits.from_megapixels(0)).width == 400


def test_declared_size_absurd_for_the_file_is_refused(tmp_path):
    blank = tmp_path / "in" / "blank.png"
    blank.parent.mkdir()
    blank.write_bytes(png_bomb(10000, 10000))  # 100 MP (under the limit) in 12 KB
    with pytest.raises(InputError, match=r"100 MP in 12 KB \(8\d\d\d pixels per byte; real scans hold under ~50\)"):
        inspect_page(blank, blank.parent, tmp_path / "run")


def test_pillow_guard_is_not_changed_at_import():
    code = ("from PIL import Image; d = Image.MAX_IMAGE_PIXELS\n"
            "import newsbag.pages, newsbag.review.stage, newsbag.cli\n"
            "sys_path = __import__('sys').path.insert(0, %r)\n"
            "import _image\n"
            "assert Image.MAX_IMAGE_PIXELS == d, Image.MAX_IMAGE_PIXELS\n" % str(REPO / "runners"))
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_accepted_broadsheet_over_pillows_guard_is_read(tmp_path):
    """13000 x 14000 = 182 MP: over Pillow's 179 MP refusal, under newsbag's 400 MP limit."""
    page = tmp_path / "in" / "big.png"
    page.parent.mkdir()
    page.write_bytes(png_bomb(13000, 14000))
    rec = inspect_page(page, page.parent, tmp_path / "run", InputLimits(max_pixels_per_byte=0))
    assert (rec.width, rec.height) == (13000, 14000)
    sys.path.insert(0, str(REPO / "runners"))
    try:
        import _image
        with _image.open_page(rec.image_path) as im:
            assert im.size == (13000, 14000)
    finally:
        sys.path.remove(str(REPO / "runners"))
    assert Image.MAX_IMAGE_PIXELS is not None


# --- orientation and dpi ----------------------------------------------------------------


@pytest.mark.parametrize("orientation,size", [(6, (100, 150)), (8, (100, 150)), (3, (150, 100)), (1, (150, 100))])
def test_exif_orientation_is_applied(tmp_path, orientation, size):
    src = rotated_jpeg(tmp_path / "in" / "r.jpg", orientation)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert (rec.width, rec.height) == size
    with Image.open(rec.image_path) as im:
        assert im.size == size
        assert im.getexif().get(0x0112, 1) == 1
        if orientation == 6:  # the viewer's top-left is black: boxes of any runner are upright
            arr = np.asarray(im.convert("L"))
            assert arr[:25, :25].mean() < 40 and arr[-40:, -40:].mean() > 200
    assert (Path(rec.image_path) == src.resolve()) == (orientation == 1)


_TURN = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
         5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_90, 7: Image.Transpose.TRANSVERSE,
         8: Image.Transpose.ROTATE_270}  # orientation -> how the page was stored (inverse of showing it)


@pytest.mark.parametrize("orientation", range(2, 9))
@pytest.mark.parametrize("compression", [None, "tiff_lzw"])  # Pillow decodes these by two different paths
def test_tiff_orientation_tag_is_applied(tmp_path, orientation, compression):
    upright = np.full((150, 100), 255, np.uint8)
    upright[:10, :] = 0
    upright[:30, :30] = 0
    src = tmp_path / "in" / "r.tif"
    src.parent.mkdir()
    stored = Image.fromarray(upright).transpose(_TURN[orientation])
    stored.save(src, tiffinfo={274: orientation}, dpi=(300, 200), **({"compression": compression} if compression else {}))
    rec = inspect_page(src, src.parent, tmp_path / "run")
    assert (rec.width, rec.height) == (100, 150) and f"orientation {orientation}" in rec.note
    with Image.open(rec.image_path) as im:
        assert (np.asarray(im) == upright).all()
        dpi = (200, 300) if orientation >= 5 else (300, 200)  # x/y swap with a quarter turn
        assert tuple(round(v) for v in im.info["dpi"]) == dpi


def test_exports_of_a_turned_page_name_an_image_its_boxes_fit(tmp_path, capsys):
    """PAGE-XML, ALTO and COCO of a JPEG with EXIF orientation 6 named the original (stored 150 x 100)
    with imageWidth 100, imageHeight 150 and upright boxes: a reader of its pixels (OCR-D, which
    checks imageWidth against them, or PIL without exif_transpose) saw every box turned. They name
    the upright copy the boxes were found on, as review does; an unturned page keeps its original."""
    src = rotated_jpeg(tmp_path / "in" / "r.jpg")
    write_image(tmp_path / "in" / "plain.png")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "stages": [
        {"name": "fake", "family": "fake", "variants": {"v": {}}}, {"name": "fusion", "kind": "fusion"},
        {"name": "export", "kind": "export", "formats": ["page-xml", "alto", "coco"]}]}))
    run = tmp_path / "run"
    code, _, err = run_cli(capsys, "run", "--input-dir", src.parent, "--run-dir", run, "--config", config)
    assert code == 0, err
    records = {Path(p.path).name: p for p in read_pages(run)}
    turned, plain = records["r.jpg"], records["plain.png"]

    def pixels_wh(folder: Path, name: str) -> tuple[int, int]:
        with Image.open(folder / name) as im:  # no exif_transpose: the stored pixels
            return im.size

    for fmt, attr in (("page-xml", "imageFilename"), ("alto", "fileName")):
        for rec in (turned, plain):
            (xml,) = (run / "exports" / fmt).glob(f"fusion/*/{rec.page_id}.xml")
            text = xml.read_text()
            name = re.search(rf'{attr}="([^"]*)"' if fmt == "page-xml" else rf"<{attr}>([^<]*)<", text).group(1)
            assert pixels_wh(xml.parent, name) == (rec.width, rec.height), (fmt, rec.path, name)
            assert (Path(xml.parent, name).resolve() == (run / rec.path).resolve()) == (rec is plain)
    (coco,) = (run / "exports" / "coco" / "fusion").glob("*.json")
    for image in json.loads(coco.read_text())["images"]:
        assert pixels_wh(coco.parent, image["file_name"]) == (image["width"], image["height"])


def test_8bit_copies_keep_the_dpi(tmp_path):
    src = write_image(tmp_path / "in" / "p.tif", size=(64, 48), mode="I;16", fmt="TIFF", dpi=(400, 400))
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        assert tuple(round(v) for v in im.info["dpi"]) == (400, 400)


# --- inputs skipped while listing folders ------------------------------------------------------


def test_skipped_inputs_are_named_with_reasons_and_merge_across_calls(tmp_path):
    root = tmp_path / "in"
    write_image(root / "good.png")
    (root / "dead.png").symlink_to(root / "missing.png")
    (root / "loop.png").symlink_to(root / "loop.png")
    (root / "sub").mkdir()
    (root / "sub" / "back").symlink_to(root)
    (root / "scan.pdf").write_bytes(b"%PDF-1.4")
    (root / "alto.xml").write_text("<alto/>")  # not a page image: counted in the log, not rejected
    os.mkfifo(root / "pipe.png")
    pages, rejected = build_pages(tmp_path / "run", [root], None, True, None)
    assert [p.page_id.split("-")[0] for p in pages] == ["good"]
    kinds = {Path(r.path).name: r.kind for r in rejected}
    assert kinds == {"dead.png": "broken_symlink", "loop.png": "symlink_loop", "back": "symlink_loop",
                     "scan.pdf": "unsupported", "pipe.png": "unreadable"}
    assert [Path(r.path).name for r in read_rejected(tmp_path / "run")] == sorted(kinds, key=lambda n: str(root / n) if n != "back" else str(root / "sub/back"))
    # The broken link is fixed and the pdf removed: the next call forgets them, keeps the rest.
    (root / "dead.png").unlink()
    write_image(root / "dead.png")
    (root / "scan.pdf").unlink()
    pages, rejected = build_pages(tmp_path / "run", [root], None, True, None)
    assert {Path(r.path).name for r in read_rejected(tmp_path / "run")} == {"loop.png", "back", "pipe.png"}


def test_an_unreadable_file_is_named(tmp_path, monkeypatch):
    page = write_image(tmp_path / "in" / "secret.png")
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p) == str(page) else real(p, mode, **kw))
    _, rejected = build_pages(tmp_path / "run", [page.parent], None, False, None)
    assert [(r.kind, r.error) for r in rejected] == [("unreadable", f"{page}: permission denied")]


def test_a_file_name_that_is_not_utf8_is_named_and_the_rest_go_on(tmp_path):
    """A Latin-1 name (an old archive unpacked as bytes) used to crash the listing with a traceback."""
    root = tmp_path / "in"
    write_image(root / "good.png")
    latin1 = os.fsencode(root) + b"/Z\xfcrich"
    write_image(Path(os.fsdecode(latin1 + b".png")))
    Path(os.fsdecode(latin1 + b".pdf")).write_bytes(b"%PDF-1.4\n")
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "newsbag", "pages", "--input-dir", str(root), "--run-dir", str(run)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and done.returncode == 4, done.stderr
    assert [p.page_id.split("-")[0] for p in read_pages(run)] == ["good"]
    shown = f"{root}/Z\\xfcrich"  # the name's bytes as escapes: text every stream and file can take
    rejected = read_rejected(run)
    assert [(r.path, r.kind) for r in rejected] == [(shown + ".pdf", "unsupported"), (shown + ".png", "bad_name")]
    assert rejected[1].error == f"{shown}.png: name is not UTF-8 text; rename it (e.g. convmv -f latin1 -t utf8)"
    status = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run)],
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    for r in rejected:
        assert r.error in done.stderr and r.error in status.stdout


def test_a_page_list_that_is_not_utf8_text_is_one_line(tmp_path):
    write_image(tmp_path / "ok.png")
    listing = tmp_path / "list.txt"
    for content, why in ((b"ok.png\nZ\xfcrich.png\n", "not UTF-8 text"), (b"ok.png\nx\x00y.png\n", "a NUL byte")):
        listing.write_bytes(content)
        with pytest.raises(InputError, match=f"cannot read manifest {listing}: line 2: {why}"):
            read_manifest_list(listing)
    listing.write_bytes(b"\xef\xbb\xbfok.png\n")  # a byte-order mark (Notepad, PowerShell 5) is no part of the first path
    assert read_manifest_list(listing) == [tmp_path / "ok.png"]


# --- the whole corpus through `newsbag run` -----------------------------------------------------


def _corpus(root: Path) -> tuple[set[str], dict[str, str]]:
    """Good and convertible pages beside every bad kind. Returns (good rel paths, bad name -> kind)."""
    good = {
        "good.png": write_image(root / "good.png", size=(80, 60)),
        "name with spaces.png": write_image(root / "name with spaces.png"),
        "zeitung_äöü_日本.png": write_image(root / "zeitung_äöü_日本.png"),
        "issue1/p1.png": write_image(root / "issue1" / "p1.png"),
        "issue2/p1.png": write_image(root / "issue2" / "p1.png"),
        "tiny.png": write_image(root / "tiny.png", size=(1, 1)),
        "cmyk.jpg": write_image(root / "cmyk.jpg", mode="CMYK", fmt="JPEG"),
        "deep.tif": write_image(root / "deep.tif", mode="I;16", fmt="TIFF"),
        "rotated.jpg": rotated_jpeg(root / "rotated.jpg"),
    }
    multi = root / "multi.tif"
    Image.new("L", (30, 20), 0).save(multi, save_all=True, append_images=[Image.new("L", (50, 40), 255)])
    good["multi.tif"] = multi
    (root / "zero.png").write_bytes(b"")
    full = write_image(root / "t.png", size=(300, 300)).read_bytes()
    (root / "t.png").unlink()
    (root / "trunc.png").write_bytes(full[: len(full) // 2])
    jpeg = write_image(root / "t.jpg", size=(300, 300), mode="RGB", fmt="JPEG").read_bytes()
    (root / "t.jpg").unlink()
    (root / "trunc.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (root / "text.png").write_text("hello, I am not a picture\n")
    (root / "bomb.png").write_bytes(png_bomb(40000, 40000))
    (root / "blank.png").write_bytes(png_bomb(10000, 10000))
    (root / "dead.png").symlink_to(root / "gone.png")
    (root / "loop.png").symlink_to(root / "loop.png")
    (root / "issue1" / "up").symlink_to(root)
    (root / "scan.pdf").write_bytes(b"%PDF-1.4\n")
    bad = {"zero.png": "empty", "trunc.png": "corrupt", "trunc.jpg": "corrupt", "text.png": "not_an_image",
           "bomb.png": "too_large", "blank.png": "absurd_size", "dead.png": "broken_symlink",
           "loop.png": "symlink_loop", "up": "symlink_loop", "scan.pdf": "unsupported"}
    return set(good), bad


def test_bad_corpus_every_bad_input_named_every_good_page_fused(tmp_path):
    root = tmp_path / "corpus"
    good, bad = _corpus(root)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "stages": [
        {"name": "fake", "family": "fake", "variants": {"v": {}}}, {"name": "fusion", "kind": "fusion"}]}))
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "newsbag", "run", "--input-dir", str(root), "--recursive", "--run-dir", str(run),
           "--config", str(config)]
    import time
    t0 = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-f", "MAXRSS_KB %M", *cmd], capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - t0
    assert done.returncode == 4, done.stderr
    last = next(line for line in done.stderr.splitlines() if line.startswith("newsbag: error:"))
    assert last.startswith("newsbag: error: 0 page run(s) failed and 10 input(s) rejected; see ")
    assert "failures.jsonl" not in last and str(run / "manifests" / "rejected.jsonl") in last
    rss_mb = int(done.stderr.strip().splitlines()[-1].split()[1]) / 1024
    assert rss_mb < 400 and seconds < 120, (rss_mb, seconds)  # the bomb alone would take 1.6-4.8 GB

    rejected = {Path(r.path).name: r for r in read_rejected(run)}
    assert {k: r.kind for k, r in rejected.items()} == bad
    for name, r in rejected.items():
        assert name in done.stderr and r.error.split(": ", 1)[1] in done.stderr  # named on stderr, with reason
    records = {Path(p.path).relative_to(Path("..") / "corpus").as_posix(): p for p in read_pages(run)}
    assert set(records) == good
    assert (records["rotated.jpg"].width, records["rotated.jpg"].height) == (100, 150)
    fused = {p.stem for p in (run / "outputs" / "fusion").glob("*/*.json") if not p.parent.name.startswith("_")}
    assert {p.page_id for p in records.values()} <= fused

    status = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run), "--json"],
                            capture_output=True, text=True, timeout=60)
    info = json.loads(status.stdout)
    assert {Path(r["path"]).name: r["kind"] for r in info["rejected"]} == bad
    assert info["rejected_by_kind"]["symlink_loop"] == 2
    text = subprocess.run([sys.executable, "-m", "newsbag", "status", "--run-dir", str(run)],
                          capture_output=True, text=True, timeout=60).stdout
    assert "rejected inputs 10 (absurd_size 1, broken_symlink 1, corrupt 2, empty 1, not_an_image 1, " \
           "symlink_loop 2, too_large 1, unsupported 1)" in text
    assert "bomb.png: declares 40000x40000" in text


def test_a_page_taller_than_a_jpeg_can_be_is_reviewed(tmp_path):
    """A strip 1 x 70000 px is a page like any other: its gallery scan used to stop the whole run
    (libjpeg takes at most 65500 px a side: OSError traceback, exit 1, nothing after review)."""
    root = tmp_path / "in"
    write_image(root / "good.png")
    write_image(root / "strip.png", size=(1, 70000))
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"version": 1, "runners_dir": str(FAKE_RUNNERS), "stages": [
        {"name": "fake", "family": "fake", "variants": {"v": {}}}, {"name": "fusion", "kind": "fusion"},
        {"name": "review", "kind": "review"}]}))
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "newsbag", "run", "--input-dir", str(root), "--run-dir", str(run),
                           "--config", str(config)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (strip,) = (p for p in read_pages(run) if p.page_id.startswith("strip-"))
    with Image.open(run / "review" / "pages" / strip.page_id / "scan.jpg") as scan:
        assert scan.height == 65500 and scan.width == 1


@pytest.mark.parametrize("name,fmt", [("p.gif", "GIF"), ("p.jp2", "JPEG2000"), ("p.ppm", "PPM")])
def test_more_formats_get_an_8bit_copy(tmp_path, name, fmt):
    src = write_image(tmp_path / "in" / name, size=(64, 48), mode="RGB", fmt=fmt)
    (rec,), rejected = build_pages(tmp_path / "run", [src.parent], None, False, None)
    assert not rejected and (rec.width, rec.height) == (64, 48) and rec.image_path.endswith(".png")


def test_a_float_page_with_nan_or_inf_pixels_keeps_its_content(tmp_path):
    """One NaN or inf pixel of a 32-bit float TIFF used to make the whole 8-bit copy black (its
    range became NaN/inf), and the page went on to every runner as good."""
    grad = np.tile(np.linspace(0.0, 1.0, 64, dtype=np.float32), (48, 1))
    grad[0, 0], grad[0, 1], grad[0, 2] = np.nan, np.inf, -np.inf
    src = tmp_path / "in" / "float.tif"
    src.parent.mkdir()
    Image.fromarray(grad, "F").save(src)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        out = np.asarray(im)
    expect = np.round(grad[1] * 255)  # the finite pixels span 0..1: scaled to 0..255
    assert np.abs(out[1].astype(int) - expect).max() <= 1
    assert out[0, :3].tolist() == [0, 255, 0]  # NaN and -inf black, +inf white


def test_a_float_page_with_no_finite_pixel_is_rejected(tmp_path):
    src = tmp_path / "in" / "nan.tif"
    src.parent.mkdir()
    Image.fromarray(np.full((48, 64), np.nan, np.float32), "F").save(src)
    with pytest.raises(InputError, match="no finite pixel value") as err:
        inspect_page(src, src.parent, tmp_path / "run")
    assert str(src) in str(err.value) and err.value.kind == "corrupt"


@pytest.mark.parametrize("name,arr,photometric", [
    ("f64.tif", np.tile(np.linspace(0.0, 1.0, 64), (48, 1)), None),       # float64 grey: Pillow cannot open it
    ("rgbf32.tif", np.repeat(np.tile(np.linspace(0.0, 1.0, 64, dtype=np.float32), (48, 1))[..., None], 3, -1),
     "rgb"),                                                                # float RGB: it became all black
])
def test_a_tiff_only_tifffile_reads_keeps_its_content_and_the_batch_goes_on(tmp_path, name, arr, photometric):
    """A TIFF Pillow cannot identify went to a reader that knew 16-bit RGB only: a float64 grey
    page stopped the whole manifest with a traceback (exit 1, nothing written), a float RGB page
    was cast to uint8 (0..1 -> 0) and passed on as a black page."""
    tifffile = pytest.importorskip("tifffile")
    good = write_image(tmp_path / "in" / "good.png")
    tifffile.imwrite(tmp_path / "in" / name, arr, photometric=photometric)
    pages, rejected = build_pages(tmp_path / "run", [good.parent], None, False, None)
    assert not rejected and len(pages) == 2
    (rec,) = (p for p in pages if p.path.endswith(name))
    with Image.open(rec.image_path) as im:
        out = np.asarray(im.convert("L"))
    assert (rec.width, rec.height) == (64, 48)
    assert np.abs(out[0].astype(int) - np.round(np.linspace(0, 255, 64))).max() <= 1


def test_a_32bit_integer_page_is_scaled_by_its_depth_not_clipped_at_16_bits(tmp_path):
    """Values of a 32-bit integer page over 65535 were clipped to white: a page using 0..250000
    came out three-quarters white."""
    src = tmp_path / "in" / "i32.tif"
    src.parent.mkdir()
    Image.fromarray((np.tile(np.arange(64), (48, 1)) * 4000).astype(np.int32), "I").save(src)
    rec = inspect_page(src, src.parent, tmp_path / "run")
    with Image.open(rec.image_path) as im:
        out = np.asarray(im)
    assert out[0].tolist() == (np.arange(64) * 4000 * 255 // (63 * 4000)).tolist()


def test_a_truncated_tiff_only_tifffile_reads_is_rejected_and_the_batch_goes_on(tmp_path):
    """tifffile's decoders raise what they like on a corrupt file (here zlib.error): it escaped
    as a traceback that stopped the whole manifest."""
    tifffile = pytest.importorskip("tifffile")
    good = write_image(tmp_path / "in" / "good.png")
    bad = tmp_path / "in" / "cut.tif"
    tifffile.imwrite(bad, np.random.default_rng(0).random((60, 80, 3), np.float32), photometric="rgb",
                     compression="zlib")
    bad.write_bytes(bad.read_bytes()[: bad.stat().st_size * 2 // 3])
    pages, rejected = build_pages(tmp_path / "run", [good.parent], None, False, None)
    assert [Path(p.path).name for p in pages] == ["good.png"]
    (r,) = rejected
    assert r.path == str(bad) and r.kind == "corrupt" and r.error.startswith(f"{bad}: cannot decode image: ")
