"""The transcription stage end to end with the real PP-OCR recogniser on a rendered two-column page."""

import json
import os

import pytest

from newsbag import freshness, rundir
from newsbag.transcription.stage import run_transcription
from newsbag.transcription.options import parse_transcription_options
from nbtest import REPO, run_cli, write_manifest
from PIL import Image
from newsbag.resources import default_config_path
from stage_kit import HEADLINE, LEFT, RIGHT, as_made_by, fused_record, page_record, words, write_run

pytest.importorskip("onnxruntime")
pytest.importorskip("rapidocr_onnxruntime")

def _move_first_box(path):
    """A page as a rerun of its detector leaves it: its first box a pixel lower."""
    page = json.loads(path.read_text())
    x0, y0, x1, y1 = page["regions"][0]["bbox_xyxy"]
    page["regions"][0]["bbox_xyxy"] = [x0, y0 + 1, x1, y1 + 1]
    path.write_text(json.dumps(page))


def test_transcribes_in_reading_order_as_one_article_and_resumes(tmp_path):
    run = write_run(tmp_path)
    result = run_transcription(run, ["p1"], {})
    assert (result["ok"], result["failed"], result["variant"]) == (1, 0, "C")
    out = rundir.transcript_dir(run, "C")
    record = json.loads((out / "p1.json").read_text())
    # regions in reading order: headline, left column, right column; each read from its own lines;
    # the headline had no detected line: read as one crop (it is at most 2.5 line heights tall)
    assert [r["region"] for r in record["regions"]] == [0, 1, 2]
    assert [len(r["lines"]) for r in record["regions"]] == [1, 3, 3]
    assert len(words(record["regions"][0]["text"]) & words(HEADLINE)) >= 3
    for region, expected in ((record["regions"][1], LEFT), (record["regions"][2], RIGHT)):
        got = region["text"].splitlines()
        assert len(got) == 3
        for line, want in zip(got, expected):  # the real model reads clean print nearly perfectly
            assert len(words(line) & words(want)) >= len(want.split()) - 1, (line, want)
    # one article: the headline, its column and the continuation at the top of the next column
    assert len(record["articles"]) == 1
    assert record["articles"][0]["regions"] == [0, 1, 2]
    assert len(words(record["articles"][0]["headline"]) & words(HEADLINE)) >= 3
    assert (out / "p1.txt").read_text().strip() == record["text"]
    index = [json.loads(line) for line in (out / "transcripts.jsonl").read_text().splitlines()]
    assert [(a["page_id"], a["article"]) for a in index] == [("p1", 0)]

    before = os.stat(out / "p1.json").st_mtime_ns
    again = run_transcription(run, ["p1"], {})
    assert (again["ok"], again["skipped"]) == (0, 1)
    assert os.stat(out / "p1.json").st_mtime_ns == before
    # the same line boxes under a new mtime (a copy) leave it current; new ones (a rerun of the
    # line detector) make it stale
    lines_path = rundir.source_dir(run, "text_lines", "lines") / "p1.json"
    os.utime(lines_path, ns=(before + 10**9, before + 10**9))
    assert run_transcription(run, ["p1"], {})["skipped"] == 1
    _move_first_box(lines_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1


def test_a_page_without_fused_output_fails_alone_and_the_index_covers_the_whole_manifest(tmp_path):
    run = write_run(tmp_path, pids=("p1", "p2"))
    (rundir.fused_dir(run, "C") / "p2.json").unlink()
    result = run_transcription(run, ["p1", "p2"], {})
    assert (result["ok"], result["failed"]) == (1, 1)
    fused = rundir.fused_dir(run, "C") / "p2.json"
    assert result["failures"][0]["page_id"] == "p2" and f"page p2: {fused}: " in result["failures"][0]["error"]
    ledger = [json.loads(line) for line in rundir.failures_ledger(run).read_text().splitlines()]
    assert [(r["stage"], r["page_id"]) for r in ledger] == [("transcription", "p2")]
    # a later call for p2 only keeps p1's articles in the run-level index
    run_transcription(run, ["p2"], {})
    index = (rundir.transcript_dir(run, "C") / "transcripts.jsonl").read_text()
    assert '"page_id": "p1"' in index


def test_cli_transcribe_exits_4_on_a_failed_page(tmp_path, capsys):
    run = write_run(tmp_path, pids=("p1", "p2"))
    (rundir.fused_dir(run, "C") / "p2.json").unlink()
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run)
    assert code == 4
    assert "transcription: 1 page(s) failed" in err


def test_cli_transcribe_with_no_recommended_variant_says_so_in_one_line(tmp_path, capsys):
    # fusion ran but every variant was skipped (its sources matched nothing): no recommendation
    run = write_run(tmp_path)
    (rundir.fusion_dir(run) / "summary.json").write_text(json.dumps({"recommended_variant": None}))
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run)
    assert code == 2
    assert err.strip() == ("newsbag: error: transcription: no recommended variant in outputs/fusion/summary.json; "
                           "run fusion first or set the stage's variant")


@pytest.mark.parametrize("options, message", [
    ({"colour": 1}, "unknown key 'colour'"),
    ({"device": "tpu"}, "device must be one of auto, gpu, cpu, got 'tpu'"),
    ({"lines_source": "text_lines"}, "lines_source must be a string 'stage/variant' or '', got 'text_lines'"),
    ({"page_timeout_s": 0}, "page_timeout_s must be a number > 0 (s), got 0"),
    ({"recognizer_family": "kraken"}, "recognizer_family must be one of recognize, recognize_tesseract, got 'kraken'"),
])
def test_bad_options_are_refused_in_one_line(options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_transcription_options(options)


def test_regions_inside_page_reader_blocks_take_their_text(tmp_path):
    # PaddleOCR-VL read the right column as one block (its block_content); the headline and
    # the left column have no block and are recognised. Only their 4 lines go to the runner.
    run = write_run(tmp_path)
    block = "and the town council\nmet on the next day\nto count the losses"
    vl = page_record("p1", [([535, 145, 975, 335], "text", "text")], "doc_parser")
    vl["source"] = {"stage": "paddle_vl15", "variant": "doc_parser", "family": "paddle_vl15", "model": "m", "device": "gpu"}
    vl["regions"][0]["text"] = block
    vl_path = rundir.source_dir(run, "paddle_vl15", "doc_parser") / "p1.json"
    vl_path.parent.mkdir(parents=True)
    vl_path.write_text(json.dumps(vl))
    result = run_transcription(run, ["p1"], {"block_text_sources": ["paddle_vl15/doc_parser"]})
    assert (result["ok"], result["failed"]) == (1, 0)
    out = rundir.transcript_dir(run, "C")
    assert len(json.loads((out / "_plan" / "p1.json").read_text())["crops"]) == 4
    record = json.loads((out / "p1.json").read_text())
    right = record["regions"][2]
    assert right["text"] == block
    assert right["lines"] == [{"bbox_xyxy": [535, 145, 975, 335], "text": block, "score": 0.9,
                               "source": "paddle_vl15/doc_parser"}]
    left = record["regions"][1]["text"].splitlines()
    assert len(left) == 3 and len(words(left[0]) & words(LEFT[0])) >= 3
    # a new answer of the page reader makes the page stale
    _move_first_box(vl_path)
    assert run_transcription(run, ["p1"], {"block_text_sources": ["paddle_vl15/doc_parser"]})["ok"] == 1


def test_a_bad_line_page_or_an_unforeseen_error_fails_that_page_alone(tmp_path, monkeypatch):
    """The failure names the file that is bad (the text-line page here, not the fused page, which
    is fine), and an error nobody foresaw fails its page with one line instead of the stage."""
    import newsbag.transcription.stage as transcription

    run = write_run(tmp_path, pids=("p1", "p2"))
    bad = rundir.source_dir(run, "text_lines", "lines") / "p2.json"
    bad.write_text("[1, 2]")
    result = run_transcription(run, ["p1", "p2"], {})
    assert (result["ok"], result["failed"]) == (1, 1)
    assert result["failures"] == [{"page_id": "p2", "error": f"page p2: {bad}: page must be a JSON object, got list"}]

    def broken(*args):
        raise KeyError("regions")

    monkeypatch.setattr(transcription, "plan_page", broken)
    result = run_transcription(run, ["p1"], {}, force=True)
    assert result["failures"] == [{"page_id": "p1", "error": "page p1: KeyError: 'regions'"}]


@pytest.mark.parametrize("options, message", [
    ({"allow_cpu_fallback": "no"}, "allow_cpu_fallback must be true or false, got 'no'"),   # quoted, was read as True
    ({"max_restarts": [1]}, "max_restarts must be a whole number >= 0, got [1]"),          # was a TypeError traceback
    ({"max_restarts": -1}, "max_restarts must be a whole number >= 0, got -1"),
    ({"max_restarts": 1.5}, "max_restarts must be a whole number >= 0, got 1.5"),          # was cut to 1
])
def test_the_recogniser_stage_entries_are_checked_as_a_model_stage_s_are(options, message):
    # the same entries of a model stage are refused by config (tests/test_config.py); here they
    # make the recogniser's ModelStage, so they follow the same rule
    with pytest.raises(ValueError) as exc:
        parse_transcription_options(options)
    assert str(exc.value) == f"transcription stage: {message}"


def test_a_page_waiting_for_the_recogniser_is_a_file_not_its_fused_page_in_memory(tmp_path, monkeypatch):
    """A transcription call over 100k pages cannot keep every planned page's fused page (with its
    members) until the recogniser has read them all: each is let go once its plan is written."""
    import weakref

    import newsbag.transcription.stage as transcription

    class Page(dict):  # a dict that can be watched for its end
        pass

    pids = ("p1", "p2", "p3", "p4")
    run = write_run(tmp_path, pids=pids)
    fused = rundir.fused_dir(run, "C")
    live: set[str] = set()
    most = [0]
    real = transcription.read_page

    def watched(path, page_id, **kwargs):
        page = real(path, page_id, **kwargs)
        if os.path.dirname(path) != str(fused):
            return page
        page = Page(page)
        live.add(page_id)
        weakref.finalize(page, live.discard, page_id)
        most[0] = max(most[0], len(live))
        return page

    monkeypatch.setattr(transcription, "read_page", watched)
    result = run_transcription(run, list(pids), {})
    assert (result["ok"], result["failed"]) == (4, 0)
    assert most[0] <= 2  # the page being planned and, at most, the one before it
    out = rundir.transcript_dir(run, "C")
    for pid in pids:   # each page's transcript as a page alone gives it
        record = json.loads((out / f"{pid}.json").read_text())
        assert [r["region"] for r in record["regions"]] == [0, 1, 2]
        assert [len(r["lines"]) for r in record["regions"]] == [1, 3, 3]
        assert record["page_id"] == pid and record["image"]["path"] == f"img/{pid}.png"


def test_the_search_index_is_written_as_the_transcripts_are_read(tmp_path):
    """transcripts.jsonl over 100k pages is GBs of text: it is streamed to its file, never gathered
    whole in memory (every line, then their join, then its bytes): memory does not grow with the pages."""
    import tracemalloc

    from newsbag.transcription.files import write_search_index

    run = tmp_path / "run"
    (run / "manifests").mkdir(parents=True)
    out = rundir.transcript_dir(run, "C")
    out.mkdir(parents=True)
    text = "Zeitung " * 25_000   # 200 KB of article text per page

    def peak(n: int) -> int:
        pids = [f"p{k}" for k in range(n)]
        write_manifest(run, [{"page_id": p, "path": f"img/{p}.png", "image_path": f"/img/{p}.png", "width": 10,
                              "height": 10, "sha256": "0"} for p in pids])
        for pid in pids:
            (out / f"{pid}.json").write_text(json.dumps({"page_id": pid, "articles": [
                {"article": 0, "regions": [0], "headline": "", "text": text}]}))
        tracemalloc.start()
        try:
            assert write_search_index(run, "C") == (n, [])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    peak(2)   # imports and caches of a first call out of the way
    few = peak(10)
    assert peak(40) < few + 2 * len(text)   # was 30 pages' text more, three times over
    lines = (out / "transcripts.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["page_id"] for line in lines] == [f"p{k}" for k in range(40)]
    assert json.loads(lines[0]) == {"page_id": "p0", "variant": "C", "article": 0, "regions": [0], "headline": "",
                                    "text": text}


def test_a_moved_run_dir_keeps_its_transcripts_current(tmp_path):
    """DESIGN §6: a run can be moved. Where the stage keeps its line plans is no input of a
    transcript: the run dir renamed, a rerun skips every page and runs no recogniser."""
    run = write_run(tmp_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    moved = tmp_path / "moved"
    os.rename(run, moved)
    again = run_transcription(moved, ["p1"], {})
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 1, 0)


def test_a_run_copied_without_its_mtimes_keeps_its_transcripts_current(tmp_path, monkeypatch):
    """`cp -r` (the same bytes, new mtimes): a rerun skips every page, rewrites no transcript
    (export checks them by identity), and after it checks the copy by stat calls again."""
    import shutil

    run = write_run(tmp_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, copy_function=shutil.copyfile)
    for path in copy.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 7 * 10**9))
    out = rundir.transcript_dir(copy, "C")
    stamps = {name: os.stat(out / name).st_mtime_ns for name in ("p1.json", "p1.txt")}
    again = run_transcription(copy, ["p1"], {})
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 1, 0)
    assert {name: os.stat(out / name).st_mtime_ns for name in stamps} == stamps
    hashed = []
    real = freshness.file_digest
    monkeypatch.setattr(freshness, "file_digest", lambda path: hashed.append(path) or real(path))
    assert run_transcription(copy, ["p1"], {})["skipped"] == 1 and hashed == []


def test_a_call_killed_before_its_search_index_was_rebuilt_leaves_it_to_the_rerun(tmp_path, monkeypatch):
    # Slurm's time limit hits while transcripts.jsonl is rebuilt (GBs over 100k pages), after the
    # pages' transcripts were written: the rerun finds every page current, and the index must
    # still come to hold them.
    from newsbag.transcription import files as transcript_files

    run = write_run(tmp_path, pids=("p1", "p2"))
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    index = rundir.transcript_dir(run, "C") / "transcripts.jsonl"
    assert {json.loads(line)["page_id"] for line in index.read_text().splitlines()} == {"p1"}

    def killed(*args):
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(transcript_files, "write_search_index", killed)
        with pytest.raises(KeyboardInterrupt):
            run_transcription(run, ["p2"], {})
    assert (rundir.transcript_dir(run, "C") / "p2.json").exists()
    result = run_transcription(run, ["p1", "p2"], {})
    assert (result["ok"], result["skipped"]) == (0, 2)
    assert {json.loads(line)["page_id"] for line in index.read_text().splitlines()} == {"p1", "p2"}
    before = index.stat().st_mtime_ns
    run_transcription(run, ["p1", "p2"], {})   # current now: not rewritten
    assert index.stat().st_mtime_ns == before


def test_a_page_whose_fused_page_is_gone_loses_its_transcript_and_index_lines(tmp_path):
    # p2 was transcribed, then its fusion failed on a rerun (fusion removes a failed page's
    # layout): its old text must not stay in the run's transcripts as if current (export
    # already drops that page's files).
    run = write_run(tmp_path, pids=("p1", "p2"))
    assert run_transcription(run, ["p1", "p2"], {})["ok"] == 2
    out = rundir.transcript_dir(run, "C")
    (rundir.fused_dir(run, "C") / "p2.json").unlink()
    result = run_transcription(run, ["p2"], {})
    assert (result["ok"], result["failed"]) == (0, 1)
    assert not (out / "p2.json").exists() and not (out / "p2.txt").exists()
    assert {json.loads(line)["page_id"] for line in (out / "transcripts.jsonl").read_text().splitlines()} == {"p1"}


def test_a_forced_transcription_that_reads_the_same_text_leaves_its_files_as_they_were(tmp_path):
    """`newsbag transcribe --force` reads every page again; a transcript that comes out the
    same keeps its files (mtime, inode), so export, which checks transcripts by identity,
    redoes nothing."""
    run = write_run(tmp_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    out = rundir.transcript_dir(run, "C")
    stamps = {name: (os.stat(out / name).st_mtime_ns, os.stat(out / name).st_ino) for name in ("p1.json", "p1.txt")}
    assert run_transcription(run, ["p1"], {}, force=True)["ok"] == 1
    assert {name: (os.stat(out / name).st_mtime_ns, os.stat(out / name).st_ino) for name in stamps} == stamps


def test_a_call_interrupted_midway_keeps_the_pages_already_read_and_its_rerun_reads_only_the_rest(tmp_path, monkeypatch):
    # Slurm's time limit (SIGTERM, which unwinds like Ctrl-C) hits while the recogniser is at the
    # third of five pages: the two pages it read must not be lost (they were kept only until the
    # whole batch was read), and the rerun must read only the three it had not read.
    from newsbag import orchestrator

    pids = ("p1", "p2", "p3", "p4", "p5")
    run = write_run(tmp_path, pids=pids)
    real = orchestrator.run_source
    given = []

    def interrupted_after_two(*args, on_page=lambda o: None, **kwargs):
        settled = []

        def on_page_then_stop(o):
            on_page(o)
            settled.append(o.page_id)
            if len(settled) == 2:
                raise KeyboardInterrupt

        given.append([p.page_id for p in args[3]])
        return real(*args, on_page=on_page_then_stop, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(orchestrator, "run_source", interrupted_after_two)
        with pytest.raises(KeyboardInterrupt):
            run_transcription(run, list(pids), {})
    out = rundir.transcript_dir(run, "C")
    kept = sorted(p.stem for p in out.glob("p*.json"))
    assert kept == ["p1", "p2"]
    for pid in kept:   # whole transcripts, as an uninterrupted call writes them
        record = json.loads((out / f"{pid}.json").read_text())
        assert [len(r["lines"]) for r in record["regions"]] == [1, 3, 3]
        assert (out / f"{pid}.txt").read_text().strip() == record["text"]
    before = {pid: os.stat(out / f"{pid}.json").st_mtime_ns for pid in kept}

    monkeypatch.setattr(orchestrator, "run_source", lambda *a, **k: given.append([p.page_id for p in a[3]]) or real(*a, **k))
    result = run_transcription(run, list(pids), {})
    assert (result["ok"], result["skipped"], result["failed"]) == (3, 2, 0)
    assert given == [list(pids), ["p3", "p4", "p5"]]
    assert {pid: os.stat(out / f"{pid}.json").st_mtime_ns for pid in kept} == before
    index = [json.loads(line)["page_id"] for line in (out / "transcripts.jsonl").read_text().splitlines()]
    assert index == list(pids)


def test_a_crop_the_recogniser_drops_as_degenerate_shifts_no_line_into_another_region(tmp_path):
    # A speck the line detector boxed (1.5 x 1 px) at the left column's edge is cut to a crop
    # 0.5 px wide; the runner's output cleaning drops it (boxes under 1 px), so it returns one
    # line fewer than planned. Lines were paired with their regions by position: every later
    # line moved one region back (the right column's first line was read as the left's last).
    run = write_run(tmp_path)
    lines_path = rundir.source_dir(run, "text_lines", "lines") / "p1.json"
    page = json.loads(lines_path.read_text())
    page["regions"].insert(0, {"bbox_xyxy": [479.5, 150, 481, 151], "label": "text_line", "class": "text_line",
                               "score": 0.9, "order": None, "text": None})
    lines_path.write_text(json.dumps(page))
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert [len(r["lines"]) for r in record["regions"]] == [1, 3, 3]
    for region, expected in ((record["regions"][1], LEFT), (record["regions"][2], RIGHT)):
        got = region["text"].splitlines()
        assert len(got) == 3
        for line, box, want in zip(got, region["lines"], expected):
            assert len(words(line) & words(want)) >= len(want.split()) - 1, (line, want)
            assert region["bbox_xyxy"][0] <= box["bbox_xyxy"][0] < box["bbox_xyxy"][2] <= region["bbox_xyxy"][2]


def test_a_page_whose_only_crop_is_a_speck_gets_an_empty_transcript_not_a_failure_on_every_rerun(tmp_path):
    # The line detector's only box on the page is a speck (1.5 x 1 px) at the left column's
    # edge, cut to a crop 0.5 px wide. The runner dropped it as degenerate, so the page had no
    # line at all and failed ("all 1 regions the model returned were dropped"), again on
    # every rerun. Nothing of it can be read: the page gets an empty transcript and is done.
    run = write_run(tmp_path)
    lines_path = rundir.source_dir(run, "text_lines", "lines") / "p1.json"
    page = json.loads(lines_path.read_text())
    page["regions"] = [{"bbox_xyxy": [479.5, 150, 481, 151], "label": "text_line", "class": "text_line",
                        "score": 0.9, "order": None, "text": None}]
    lines_path.write_text(json.dumps(page))
    result = run_transcription(run, ["p1"], {})
    assert (result["ok"], result["failed"], result["failures"]) == (1, 0, [])
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert record["text"] == "" and all(r["lines"] == [] for r in record["regions"])
    again = run_transcription(run, ["p1"], {})
    assert (again["ok"], again["skipped"], again["failed"]) == (0, 1, 0)


def test_a_new_revision_of_the_recogniser_reads_the_transcripts_again(tmp_path, monkeypatch):
    # The recogniser's output changed for the same crops (revision 2: full-width punctuation
    # in Latin text as ASCII), but a transcript's fingerprint held only its parameters: every
    # transcript made before stayed current, with its old text, on every rerun.
    import newsbag.transcription.bag as bag

    run = write_run(tmp_path)
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    load = bag.load_tool_spec
    monkeypatch.setattr(bag, "load_tool_spec", lambda *a: {**load(*a), "revision": load(*a)["revision"] + 1})
    again = run_transcription(run, ["p1"], {})
    assert (again["ok"], again["skipped"]) == (1, 0)


def test_a_new_transcript_assembly_revision_reads_the_transcripts_again_and_status_says_why(tmp_path, monkeypatch):
    """An upgrade whose assembly code (transcription/transcript.py) makes other transcripts: status shows them
    stale with the code revision as the reason, and the next call makes them again."""
    from newsbag import revisions
    from newsbag.stage_protocol import Outputs
    from newsbag.manifest import read_pages
    from newsbag.transcription.stage import transcript_status

    run = write_run(tmp_path, pids=("p1", "p2"))
    assert run_transcription(run, ["p1", "p2"], {})["ok"] == 2
    now = revisions.REVISIONS["transcription"]
    monkeypatch.setitem(revisions.REVISIONS, "transcription", revisions.Revision(now.number + 1, now.entries))
    assert transcript_status(run, read_pages(run), {}) == [Outputs(
        "C", done=0, stale=2, failed=0, pending=0,
        reasons={f"made by transcription code revision {now.number}, now {now.number + 1}": 2})]
    again = run_transcription(run, ["p1", "p2"], {})
    assert (again["ok"], again["skipped"]) == (2, 0)
    assert json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())["revision"] == now.number + 1
    assert transcript_status(run, read_pages(run), {})[0].done == 2


def test_a_page_whose_image_changed_after_its_layout_fails_alone_and_says_why(tmp_path):
    # p2's scan was replaced by a half-size one after fusion (its layout and lines are in the
    # old pixels): the recogniser cut its crops out of the new image at the old boxes (an
    # IndexError on the crops off the image, garbage text from those on it). It fails, naming
    # both sizes and the fix; p1 goes on.
    run = write_run(tmp_path, pids=("p1", "p2"))
    image = run / "img" / "p2.png"
    with Image.open(image) as im:
        im.resize((500, 260)).save(image)
    result = run_transcription(run, ["p1", "p2"], {})
    assert (result["ok"], result["failed"]) == (1, 1)
    # the summary names the page, as the stage's other failures do (a recogniser failure did not)
    assert result["failures"] == [{"page_id": "p2", "error": (
        "page p2: ValueError: the page image is 500x260 px but its layout was made on 1000x520 px: the image changed "
        "after its layout; rerun its layout stages and fusion")}]
    assert not (rundir.transcript_dir(run, "C") / "p2.json").exists()
    # one row in the ledger, the stage's (the recogniser's own row, without the page's name, was a second)
    rows = [json.loads(line) for line in rundir.failures_ledger(run).read_text().splitlines()]
    assert [(r["stage"], r["page_id"], r["error"]) for r in rows] == [("transcription", "p2", result["failures"][0]["error"])]


@pytest.mark.parametrize("content, reason", [
    ('{"page_id": "p1", "articles": [', "Expecting value: line 1 column 32 (char 31)"),   # torn by a copy
    ('[]', "not a transcript (no list of articles with text)"),
    ('{"articles": [{"article": 0}]}', "not a transcript (no list of articles with text)"),
])
def test_an_unreadable_transcript_is_left_out_of_the_index_and_named_and_the_rest_goes_on(tmp_path, content, reason):
    # One transcript file that is no transcript (a run copied with a torn file, an edit) made
    # every call's index rebuild raise: the stage died with a bare JSONDecodeError (or
    # AttributeError, KeyError) after its pages, the other pages' new articles never reached
    # transcripts.jsonl, and so on every call until someone found the file.
    run = write_run(tmp_path, pids=("p1", "p2"))
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    out = rundir.transcript_dir(run, "C")
    (out / "p1.json").write_text(content)
    result = run_transcription(run, ["p2"], {})
    assert (result["ok"], result["failed"]) == (1, 1)
    assert result["failures"] == [{"page_id": "p1", "error": f"page p1: {out / 'p1.json'}: {reason}; "
                                                             "left out of transcripts.jsonl until "
                                                             "newsbag transcribe reads it again"}]
    index = out / "transcripts.jsonl"
    assert [json.loads(line)["page_id"] for line in index.read_text().splitlines()] == ["p2"]
    # the rerun the message names reads p1 again (its file is not current), and the index holds both
    again = run_transcription(run, ["p1", "p2"], {})
    assert (again["ok"], again["skipped"], again["failed"]) == (1, 1, 0)
    assert [json.loads(line)["page_id"] for line in index.read_text().splitlines()] == ["p1", "p2"]


def test_status_counts_transcripts_done_stale_failed_and_pending(tmp_path, capsys):
    # `newsbag transcribe` ends a call with a failed page by sending the user to `newsbag status`,
    # which said nothing of transcription at all.
    run = write_run(tmp_path, pids=("p1", "p2", "p3", "p4"))
    # named, the config is recorded and status checks by it (the embedded bag's transcription
    # options are not the stage's defaults: it reads with Tesseract)
    config = ("--config", str(REPO / "configs" / "pipeline.local.json"))
    as_made_by(run, config[1])   # its text lines current: no run redoes them, nor the transcripts after them
    (rundir.fused_dir(run, "C") / "p2.json").unlink()   # its fusion failed: the page fails here
    code, out, err = run_cli(capsys, "transcribe", "--run-dir", run, *config)
    assert code == 4 and "`newsbag status --run-dir" in err
    lines_path = rundir.source_dir(run, "text_lines", "lines") / "p3.json"   # new lines: p3 is stale
    line_page = json.loads(lines_path.read_text())
    line_page["regions"][0]["bbox_xyxy"][2] -= 1
    lines_path.write_text(json.dumps(line_page))
    (rundir.transcript_dir(run, "C") / "p4.json").unlink()   # never read: pending
    code, out, err = run_cli(capsys, "status", "--run-dir", run)
    assert code == 0
    assert "  transcription/C                      done      1  failed     1  stale     1  pending      1" in out
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["builtin"]["transcription"] == [{
        "name": "C", "done": 1, "stale": 1, "failed": 1, "pending": 1, "note": "", "whole": True,
        "reasons": {"its fused page, lines or recogniser changed": 1}}]
    # read again, the failed page's failure is no more
    (rundir.fused_dir(run, "C") / "p2.json").write_text(json.dumps(fused_record("p2", [([30, 140, 480, 340], "text", "text")])))
    assert run_cli(capsys, "transcribe", "--run-dir", run, *config)[0] == 0
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["builtin"]["transcription"] == [{
        "name": "C", "done": 4, "stale": 0, "failed": 0, "pending": 0, "note": "", "whole": True, "reasons": {}}]


def test_a_transcribe_with_no_config_anywhere_records_the_one_it_ran_with(tmp_path, capsys):
    # A run with no recorded config: `transcribe` reads with the embedded bag's options (Tesseract),
    # status checked by the stage's defaults (PP-OCR) and called every transcript stale.
    run = write_run(tmp_path, pids=("p1", "p2"))
    as_made_by(run, default_config_path())
    assert not rundir.config_record(run).exists()
    assert run_cli(capsys, "transcribe", "--run-dir", run)[0] == 0
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    (outputs,) = json.loads(out)["builtin"]["transcription"]
    assert (outputs["done"], outputs["stale"]) == (2, 0)
    again = json.loads(run_cli(capsys, "transcribe", "--run-dir", run, "--json")[1])
    assert (again["builtin"]["transcription"]["ok"], again["builtin"]["transcription"]["skipped"]) == (0, 2)


def test_status_says_nothing_of_transcription_before_the_opt_in_stage_ran(tmp_path, capsys):
    run = write_run(tmp_path)
    code, out, err = run_cli(capsys, "status", "--run-dir", run, "--json")
    assert json.loads(out)["builtin"]["transcription"] == []


def test_reading_whole_regions_needs_a_recogniser_that_finds_their_lines():
    from newsbag.transcription.options import crop_unit, parse_transcription_options

    assert crop_unit(parse_transcription_options({"recognizer_family": "recognize_tesseract"})) == "region"
    assert crop_unit(parse_transcription_options({"recognizer_family": "recognize"})) == "line"
    assert crop_unit(parse_transcription_options({"recognizer_family": "recognize_tesseract", "read": "lines"})) == "line"
    with pytest.raises(ValueError, match="read 'regions' needs a recogniser that finds lines itself "
                                         r"\(recognize_tesseract\); recognize reads one line per crop"):
        parse_transcription_options({"recognizer_family": "recognize", "read": "regions"})


def test_text_inside_a_larger_region_is_read_once(tmp_path):
    # The fused layout keeps the left column's block and, inside it, a paragraph of its last two
    # lines (another member's box): the transcript reads those lines once, in the block.
    run = write_run(tmp_path)
    path = rundir.fused_dir(run, "C") / "p1.json"
    page = fused_record("p1", [([30, 20, 560, 90], "headline", "headline"), ([30, 140, 480, 340], "text", "text"),
                               ([530, 140, 980, 340], "text", "text"), ([34, 196, 476, 336], "text", "text")])
    path.write_text(json.dumps(page))
    assert run_transcription(run, ["p1"], {})["ok"] == 1
    record = json.loads((rundir.transcript_dir(run, "C") / "p1.json").read_text())
    assert [r["region"] for r in record["regions"]] == [0, 1, 2]
    text = record["text"].lower()
    for line in LEFT[1:]:
        assert text.count(line.split()[-1]) == 1, (line, text)
