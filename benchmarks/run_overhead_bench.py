"""The fixed cost of one `newsbag run` call on a large run directory, as a Slurm array task pays it:
CPU seconds and peak RSS of `newsbag pages`, of a `--shard K/N` task with nothing or a few pages to
do, of an unsharded no-change rerun, and of `newsbag status`.

    python benchmarks/run_overhead_bench.py --pages 20000 --shards 100 [--todo 3] [--steps ...]

One synthetic collection: N tiny PNGs (8x8 grey, 1,000 per folder) made into a run directory by
the real `newsbag pages`. Every page then gets a current source page of the fake runner
(`tests/fake_runners`, one stage `fake`, variant `a`) and each shard of `--shards` its
`run_report.shard-K-of-N.json`, as array tasks leave them: the page's fingerprint and file identity.
Each step is its own process pinned to one core (`fuse_stage_bench.timed`: CPU user+sys of the
process and the runners it waited for, wall, peak RSS). `task-todo` first removes `--todo` page
files of its shard, so the fake runner starts and writes them (its start is most of that step).
The set-up that reads the manifest runs in processes of its own: a child started by a grown
benchmark process reports that size as its own peak RSS.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _machine import machine_line  # noqa: E402
from fuse_stage_bench import REPO, bytecode_env, timed  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from nbtest import write_fake_config  # noqa: E402

STEPS = ("pages", "pages-again", "task-done", "task-todo", "run-done", "status")
STAGE, VARIANT = "fake", "a"


def write_images(folder: Path, n: int) -> None:
    """n distinct 8x8 grey PNGs, 1,000 per sub-folder (as issues are)."""
    from PIL import Image

    for i in range(n):
        path = folder / f"issue{i // 1000:04d}" / f"p{i:06d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.frombytes("L", (8, 8), i.to_bytes(4, "little") * 16).save(path)


def write_outputs(run: Path, config: Path, shards: int) -> None:
    """A current source page for every manifest page, and each shard's run report naming its pages
    with the fingerprint and file identity the runner records (`runners/_loop.py` finish_ok)."""
    from newsbag import freshness, rundir
    from newsbag.config import load_config
    from newsbag.manifest import read_pages, select_shard

    stage = next(s for s in load_config(config).stages if s.name == STAGE)
    out = rundir.source_dir(run, STAGE, VARIANT)
    out.mkdir(parents=True, exist_ok=True)
    records = read_pages(run)
    index = {}
    for p in records:
        fp = stage.page_fingerprint(VARIANT, p.sha256)
        path = out / f"{p.page_id}.json"
        path.write_text(json.dumps({
            "page_id": p.page_id, "image": {"path": p.path, "width": p.width, "height": p.height},
            "source": {"stage": STAGE, "variant": VARIANT, "family": "fake", "model": "fake-1", "device": "cpu",
                       "fingerprint": fp},
            "regions": [{"bbox_xyxy": [0, 0, 4, 4], "label": "text", "class": "text", "score": 0.9,
                         "order": None, "text": None}], "seconds": 0.001}))
        index[p.page_id] = {"status": "ok", "seconds": 0.001, "regions": 1, "fingerprint": fp,
                            "identity": freshness.file_identity(path)}
    for k in range(shards):
        pages = {p.page_id: index[p.page_id] for p in select_shard(records, (k, shards))}
        (out / f"run_report.shard-{k}-of-{shards}.json").write_text(json.dumps({
            "stage": STAGE, "variant": VARIANT, "family": "fake", "state": "finished", "pages": pages}))


def drop_pages(run: Path, shard: tuple[int, int], todo: int) -> None:
    """Remove the source pages of the first `todo` pages of `shard`: what its task has to do."""
    from newsbag.manifest import read_pages, select_shard

    for p in select_shard(read_pages(run), shard)[:todo]:
        (run / "outputs" / "sources" / STAGE / VARIANT / f"{p.page_id}.json").unlink()


def bench(n: int, shards: int, todo: int, steps: list[str]) -> None:
    """Print one row per step, as soon as it is measured."""
    with tempfile.TemporaryDirectory(prefix="run_overhead_bench_") as tmp:
        root = Path(tmp)
        write_images(root / "images", n)
        config = write_fake_config(root / "config.json", {VARIANT: {}})
        run = root / "run"
        env = bytecode_env()
        cli = [sys.executable, "-m", "newsbag"]
        pages = [*cli, "pages", "--run-dir", str(run), "--input-dir", str(root / "images"), "--recursive"]
        shard = [*cli, "run", "--run-dir", str(run), "--config", str(config), "--stages", STAGE]
        k, other = shards // 2, (shards // 2 + 1) % shards   # a done shard, and another one to do
        commands = {"pages": pages, "pages-again": pages,
                    "task-done": [*shard, "--shard", f"{k}/{shards}"],
                    "task-todo": [*shard, "--shard", f"{other}/{shards}"],
                    "run-done": shard,
                    "status": [*cli, "status", "--run-dir", str(run)]}
        for step in steps:
            if step == "task-todo":
                subprocess.run([sys.executable, __file__, "--drop-pages", str(run), f"{other}/{shards}",
                                "--todo", str(todo)], env=env, check=True)
            cpu, wall, rss = timed(commands[step], env)
            print(f"pages {n:>6}  {step:<11} {cpu:6.2f} s CPU ({wall:.2f} wall)  peak RSS {rss:5.0f} MB", flush=True)
            if step == "pages":
                subprocess.run([sys.executable, __file__, "--write-outputs", str(run), str(config), "--shards",
                                str(shards)], env=env, check=True)
                print(f"# wrote {n} source pages and {shards} shard reports ({n // shards} pages each)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=20000)
    ap.add_argument("--shards", type=int, default=100)
    ap.add_argument("--todo", type=int, default=3, help="pages the task-todo step's shard has to do")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated, of {', '.join(STEPS)} ('pages' always runs)")
    ap.add_argument("--write-outputs", nargs=2, type=Path, metavar=("RUN", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--drop-pages", nargs=2, metavar=("RUN", "K/N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write_outputs:
        write_outputs(*args.write_outputs, args.shards)
        return
    if args.drop_pages:
        k, n = map(int, args.drop_pages[1].split("/"))
        drop_pages(Path(args.drop_pages[0]), (k, n), args.todo)
        return
    steps = ["pages"] + [s for s in args.steps.split(",") if s and s != "pages"]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        ap.error(f"unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}")
    if args.shards < 2:
        ap.error("--shards must be at least 2 (one shard done, another with pages to do)")
    print(machine_line(), flush=True)
    bench(args.pages, args.shards, args.todo, steps)


if __name__ == "__main__":
    main()
