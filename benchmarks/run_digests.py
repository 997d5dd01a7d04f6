"""Digests of a finished run's outputs, apart from what records time: to show a refactor changed no output.

    python benchmarks/run_digests.py RUN --write before.json      # on the old code's run
    python benchmarks/run_digests.py RUN2 --against before.json   # on the new code's run

Each file under RUN gets a content hash after the parts that differ between two identical runs
are taken out: ISO times (PAGE/ALTO metadata, COCO's date), the run directory's own path, the
comments of images (their pixels are compared), the
fingerprints and file identities ([size, mtime_ns]) an output records of its inputs (a rerun writes
its inputs at other times), and in JSON the keys that hold times, hosts and process ids. Logs, run reports and the per-call run
summaries hold nothing but such records and are left out. ``--against`` prints the files whose
digests differ, are missing or are new, and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from PIL import Image

SKIPPED_DIRS = {"logs", "reports"}
SKIPPED_NAMES = {"run_report.json"}
# JSON keys whose values are times, hosts or process ids in a run's records
VOLATILE = {"seconds", "mean_page_seconds", "setup_seconds", "time", "started", "finished", "updated",
            "pid", "host", "at", "created", "date_created", "stage_seconds", "wall_s", "cpu_s", "fingerprint",
            "newsbag_fingerprint", "variant_fingerprints"}
# a fingerprint in text, and what is named by one: PAGE's document id, the gallery's transcript stamp
FINGERPRINTS = re.compile(rb'(("fingerprint"\s*:\s*")|(pcGtsId="pc_)|(type="fingerprint" value=")|'
                          rb'(name="newsbag-transcripts" content="\d+:))[0-9a-f]+')
MTIME_NS = 10 ** 17   # an mtime in nanoseconds since 1973: no count or coordinate of a page is this big
ISO_TIME = re.compile(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?")
IMAGES = {".png", ".jpg"}   # boards carry their fingerprint in a comment: their pixels are compared
TEXT = {".json", ".jsonl", ".xml", ".html", ".tsv", ".txt", ".csv", ".md", ".js"}


def _drop_volatile(value):
    if isinstance(value, dict):
        return {k: _drop_volatile(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        if any(isinstance(v, int) and v > MTIME_NS for v in value):   # [size, mtime_ns, ...]
            return "<identity>"
        return [_drop_volatile(v) for v in value]
    return value


def _normalised(path: Path, run: Path) -> bytes:
    if path.suffix in IMAGES:
        with Image.open(path) as image:
            return f"{image.mode} {image.size}".encode() + image.tobytes()
    data = path.read_bytes()
    if path.suffix not in TEXT:
        return data
    for name in (str(run.resolve()), str(run), run.name):   # the gallery's title names the run's folder
        data = data.replace(name.encode(), b"<run>")
    data = FINGERPRINTS.sub(rb'\1<fingerprint>', ISO_TIME.sub(b"<time>", data))
    if path.suffix == ".json":
        try:
            return json.dumps(_drop_volatile(json.loads(data)), sort_keys=True).encode()
        except ValueError:
            return data
    if path.suffix == ".jsonl":
        lines = []
        for line in data.splitlines():
            try:
                lines.append(json.dumps(_drop_volatile(json.loads(line)), sort_keys=True).encode())
            except ValueError:
                lines.append(line)
        return b"\n".join(lines)
    return data


def digests(run: Path) -> dict[str, str]:
    """Relative path -> blake2b of the normalised content, for every output file of `run`."""
    out = {}
    for path in sorted(run.rglob("*")):
        rel = path.relative_to(run)
        if not path.is_file() or rel.parts[0] in SKIPPED_DIRS or path.name in SKIPPED_NAMES:
            continue
        out[rel.as_posix()] = hashlib.blake2b(_normalised(path, run), digest_size=16).hexdigest()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--write", type=Path, help="write the digests to this JSON file")
    parser.add_argument("--against", type=Path, help="compare with digests written before")
    args = parser.parse_args()
    now = digests(args.run)
    if args.write:
        args.write.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{args.run}: {len(now)} file(s) digested")
    if not args.against:
        return 0
    before = json.loads(args.against.read_text(encoding="utf-8"))
    changed = sorted(k for k in before.keys() & now.keys() if before[k] != now[k])
    missing, new = sorted(before.keys() - now.keys()), sorted(now.keys() - before.keys())
    for label, names in (("differs", changed), ("missing", missing), ("new", new)):
        for name in names:
            print(f"  {label}: {name}")
    same = len(before.keys() & now.keys()) - len(changed)
    print(f"{same} identical, {len(changed)} differ, {len(missing)} missing, {len(new)} new")
    return 1 if changed or missing or new else 0


if __name__ == "__main__":
    sys.exit(main())
