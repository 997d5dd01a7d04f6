"""List a call's input images, give each its page id, and name the inputs skipped and why."""

from __future__ import annotations

import difflib
import errno
import hashlib
import logging
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from . import rundir
from .anchoring import anchor_path
from .errors import InputError, InputRejected, utf8_text

__all__ = [
    "IMAGE_SUFFIXES",
    "Rejected",
    "page_id_for",
    "safe_name",
    "check_input_file",
    "discover_images",
    "read_manifest_list",
    "list_inputs",
    "named_inputs",
    "no_images_message",
    "select_ids",
]

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp",
                            ".jp2", ".j2k", ".jpx", ".gif", ".pbm", ".pgm", ".ppm", ".pnm"})
# Page-like formats newsbag cannot read: named as rejected (anything else that is not an image,
# such as ALTO .xml or checksum files beside the scans, is only counted in the log).
UNSUPPORTED_SUFFIXES = frozenset({".pdf", ".djvu", ".djv", ".heic", ".heif", ".avif", ".jxl", ".svg",
                                  ".eps", ".ps", ".psd", ".dng", ".cr2", ".nef", ".raw"})
_COMMENT = re.compile(r"(?:^|\s)#.*")  # a list file's comment (`read_manifest_list`)


@dataclass(frozen=True)
class Rejected:
    """A skipped input and why. Its text is UTF-8-safe, as every writer and stream needs: the
    bytes of a non-UTF-8 name are kept as ``\\xNN`` escapes (`utf8_text`)."""

    path: str
    error: str
    kind: str = "unreadable"  # broken_symlink | symlink_loop | unreadable | unsupported | not_an_image |
    #                           corrupt | too_large | absurd_size | empty | bad_name

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", utf8_text(self.path))
        object.__setattr__(self, "error", utf8_text(self.error))


def safe_name(text: str) -> str:
    """`text` as a file name on any system: characters outside ``A-Za-z0-9_.-`` made ``_``, no
    leading or trailing dot or underscore, "page" when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "page"


def page_id_for(path: Path, root: Path) -> str:
    """Id of the page at `path` under the input root `root` the user named.

    Invariants: unique (two files never share an id: the hash covers the whole relative
    path with its extension, so ``issue1/p1.png`` and ``issue2/p1.png`` differ, as do
    ``p1.png`` and ``p1.tif``), predictable (readable folders + stem, then the hash), and
    stable (the same path relative to the named root gives the same id on any machine, in
    any rerun, whatever other roots the same call names, spelt in Unicode NFC or NFD). Symlinks
    are not resolved for naming: a link is named by where it is, not where it points. A file
    outside the root (a manifest entry elsewhere) is named by its file stem plus the hash of its
    path, so no id carries parts of an absolute path.
    """
    rel = _nfc(Path(os.path.relpath(os.path.abspath(path), os.path.abspath(root))).as_posix())
    stem = rel.rsplit(".", 1)[0] if "." in Path(rel).name else rel
    if rel.startswith("../"):
        stem = Path(stem).name
    readable = safe_name(stem.replace("/", "__"))
    digest = hashlib.sha1(rel.encode("utf-8", "surrogateescape")).hexdigest()[:8]  # a non-UTF-8 name is refused later
    return f"{readable[-80:]}-{digest}"


def _entry_problem(path: Path) -> tuple[str, str] | None:
    """(kind, reason) when `path` cannot be a page whatever its content, else None."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return "broken_symlink", f"broken symlink (points to {os.readlink(path)}, which does not exist)"
        return "unreadable", "file not found"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink_loop", "symlink loop (the link resolves to itself)"
        return "unreadable", f"cannot stat: {exc.strerror or exc}"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        return "unreadable", "not a regular file (fifo, socket or device)"
    if not os.access(path, os.R_OK):
        return "unreadable", "permission denied"
    return None


def check_input_file(path: Path) -> None:
    """Refuse the file at `path` (absolute, not resolved) when it cannot be a page whatever its
    content: a name that is not UTF-8 text, a broken link, an unreadable entry, a folder, an empty file.

    Raises:
        InputRejected: naming the file and why (``.kind`` for rejected.jsonl).
    """
    if utf8_text(str(path)) != str(path):  # the manifest, the gallery and the exports hold paths as UTF-8 text
        raise InputRejected(f"{path}: name is not UTF-8 text; rename it (e.g. convmv -f latin1 -t utf8)", "bad_name")
    problem = _entry_problem(path)
    if problem is not None:
        raise InputRejected(f"{path}: {problem[1]}", problem[0])
    if path.is_dir():  # a folder named in a --manifest list (`_walk` opens the folders it finds)
        raise InputRejected(f"{path}: a folder, not an image (list its images, or give it as --input-dir)",
                            "unreadable")
    if os.path.getsize(path) == 0:
        raise InputRejected(f"{path}: not a readable image (empty file)", "empty")


def _walk(root: Path, recursive: bool, rejected: list[Rejected], ignored: dict[str, int]) -> list[Path]:
    """Image files under `root`; every entry that is skipped for a reason goes to `rejected`.

    Symlinked folders are followed (under --recursive) unless they lead back to a folder
    already walked, which is named as a symlink loop instead of being walked forever. A run
    directory in the tree (this run's or another's) is not walked: its boards, gallery scans
    and cache copies are outputs, and would come back as new pages on every rerun.
    """
    images: list[Path] = []
    visited = {os.path.realpath(root)}
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            rejected.append(Rejected(str(folder), f"{folder}: cannot list folder: {exc.strerror or exc}", "unreadable"))
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            problem = _entry_problem(path)
            if problem is not None:
                kind, reason = problem
                rejected.append(Rejected(str(path), f"{path}: {reason}", kind))
                continue
            if path.is_dir():
                if not recursive:
                    continue
                if rundir.is_run_dir(path):
                    log.info("%s: not walked: a newsbag run directory (its images are outputs, not pages)", path)
                    continue
                real = os.path.realpath(path)
                if real in visited:
                    if entry.is_symlink():
                        rejected.append(Rejected(str(path), f"{path}: symlink loop (leads back to {real}, "
                                                 "already walked)", "symlink_loop"))
                    continue
                visited.add(real)
                stack.append(path)
                continue
            suffix = path.suffix.lower()
            if suffix in IMAGE_SUFFIXES:
                images.append(path)
            elif suffix in UNSUPPORTED_SUFFIXES:
                rejected.append(Rejected(str(path), f"{path}: unsupported format {suffix} (newsbag reads "
                                         f"{', '.join(sorted(IMAGE_SUFFIXES))}); convert it", "unsupported"))
            else:
                ignored[suffix or "(no suffix)"] = ignored.get(suffix or "(no suffix)", 0) + 1
    return sorted(images)


def discover_images(root: Path, recursive: bool, rejected: list[Rejected] | None = None) -> list[Path]:
    """Page images under `root` (sorted); skipped entries are appended to `rejected` when given.

    Hidden files are skipped silently; files that are not page images (e.g. ALTO .xml) are
    counted in one log line.
    """
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"input dir {root} does not exist or is not a directory")
    ignored: dict[str, int] = {}
    images = _walk(root, recursive, rejected if rejected is not None else [], ignored)
    if ignored:
        log.info("%s: ignored %d file(s) that are not page images (%s)", root, sum(ignored.values()),
                 ", ".join(f"{k} {v}" for k, v in sorted(ignored.items())))
    return images


def read_manifest_list(path: Path) -> list[Path]:
    """Image paths from a list file: one per line, relative to the file. A `#` starts a comment
    at the start of a line or after a space, as in a shell: inside a name (``Nr#12``) it is the name's.

    UTF-8 text, with or without a byte-order mark; lines end at ``\\n`` or ``\\r\\n``.

    Raises:
        InputError: the file cannot be read, is not UTF-8 text or holds a NUL byte (naming the line).
    """
    try:
        raw = Path(path).read_bytes()
        lines = raw.decode("utf-8-sig").split("\n")  # not splitlines: U+2028, U+0085 may be in a name
    except OSError as exc:
        raise InputError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise InputError(f"cannot read manifest {path}: line {line}: not UTF-8 text") from None
    base = Path(path).resolve().parent
    out = []
    for n, line in enumerate(lines, 1):
        if "\0" in line:
            raise InputError(f"cannot read manifest {path}: line {n}: a NUL byte (not a list of paths)")
        line = _COMMENT.sub("", line).strip()
        if line:
            out.append(Path(anchor_path(line, str(base))))
    return out


def list_inputs(
    input_dirs: list[Path], manifest: Path | None, recursive: bool, max_pages: int | None,
    rejected: list[Rejected] | None = None,
) -> list[tuple[Path, Path]]:
    """(image path, id root) of every input, in a stable order, without opening any file
    (`named_inputs` gives their ids).

    An input that is a file is one page whose id root is its folder: it gets the id naming
    that folder would give it, so a later call over the folder finds it done.
    Entries skipped while listing folders (broken symlinks, loops, unsupported formats...)
    are appended to `rejected` when given.
    """
    candidates: list[tuple[Path, Path]] = []
    if manifest is not None:
        root = Path(manifest).resolve().parent
        candidates += [(p, root) for p in read_manifest_list(manifest)]
    for root in (Path(os.path.abspath(d)) for d in input_dirs):
        candidates += ([(root, root.parent)] if root.is_file()
                       else [(p, root) for p in discover_images(root, recursive, rejected)])
    return candidates[:max_pages] if max_pages is not None else candidates


def named_inputs(candidates: list[tuple[Path, Path]], known: dict[str, str] | None,
                 rejected: list[Rejected]) -> tuple[list[tuple[Path, Path]], list[str]]:
    """The (image path, id root) pairs of `candidates` that get a page id, and their ids, each computed once.

    Ids come from names in Unicode NFC (`page_id_for`), so a folder that comes back from a Mac in
    NFD (or goes there) keeps its ids, and a page of the run (`known`: page id -> absolute path)
    found under its name spelt otherwise is that page. Two files whose names
    differ only in normalisation (Linux keeps both side by side) show as one name: they are not
    merged into one page, but both go to `rejected`, each naming the other.

    Two paths under one id are resolved to see whether they are one file; the same path again is
    one file without asking the file system (a realpath is a stat per path part, three per page
    on every rerun over 100k scans).

    Raises:
        InputError: two different files would get one page id (the same path under two named
            roots), naming both and the fix, before anything is written.
    """
    known = known or {}
    spelt: dict[str, str] = {}       # NFC name -> its first spelling listed
    twins: dict[str, set[str]] = {}  # NFC name -> its spellings, when they are different files
    named = []
    for path, _ in candidates:
        where = os.path.abspath(path)
        name = _nfc(where)
        first = spelt.setdefault(name, where)
        if first != where and not _same_file(first, where):
            twins.setdefault(name, {first}).add(where)
        named.append((where, name))
    seen: dict[str, str] = dict(known)
    kept, ids, refused = [], [], set()
    for (path, root), (where, name) in zip(candidates, named):
        twin = twins.get(name, set()) - {where}
        page_id = None if twin else page_id_for(path, root)
        other = seen.setdefault(page_id, where) if page_id else where
        if other != where and _nfc(other) == name:   # the run's page, its name spelt otherwise
            if os.path.lexists(other) and not _same_file(other, where):
                twin = {other}
            else:   # renamed to this spelling (rsync from a Mac), or one file that answers to both
                seen[page_id] = where
        elif other != where and known.get(page_id) == other and not os.path.lexists(other):
            # The run's page, gone from where its manifest says: the run was moved or copied and its
            # relative path points elsewhere now. This input takes the id; `_reanchored` tells
            # whether it is the same file, else it is inspected as a changed page.
            seen[page_id] = where
        elif other != where and os.path.realpath(other) != os.path.realpath(where):
            raise InputError(
                f"{os.path.realpath(where)} and {os.path.realpath(other)} both get page id {page_id} (the same "
                f"path under two input roots); name their common parent with --recursive, or use separate run dirs")
        if twin:
            if where not in refused:
                refused.add(where)
                others = ", ".join(f"{t} ({_form(t, where)})" for t in sorted(twin))
                rejected.append(Rejected(where, f"{where}: this {_form(where, min(twin))} spelling and {others} are "
                                         "one name in two Unicode normalisations, two files that would be one page; "
                                         "rename or remove one of them", "bad_name"))
            continue
        kept.append((path, root))
        ids.append(page_id)
    return kept, ids


def _nfc(path: str) -> str:
    return unicodedata.normalize("NFC", path)


def _form(path: str, other: str) -> str:
    """The Unicode form (NFC, NFD or mixed-form) of the first part of `path` that `other` spells otherwise,
    for a message naming two paths that look alike."""
    part = next((a for a, b in zip(Path(path).parts, Path(other).parts) if a != b), path)
    return "NFC" if _nfc(part) == part else "NFD" if unicodedata.normalize("NFD", part) == part else "mixed-form"


def _same_file(a: str, b: str) -> bool:
    """`a` and `b` are one file (a file system that ignores normalisation, as macOS's, shows one
    file under both names)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def no_images_message(input_dirs: list[Path], manifest: Path | None, recursive: bool) -> str:
    """Why no page was found, with the fix: forgetting --recursive on a folder of issue folders is the usual cause."""
    where = ", ".join(str(d) for d in input_dirs) + (f" or {manifest}" if manifest and input_dirs else str(manifest or ""))
    msg = f"no page images ({', '.join(sorted(IMAGE_SUFFIXES))}) in {where}"
    if not recursive:
        nested = {d: len(discover_images(d, True)) for d in input_dirs}
        if any(nested.values()):
            n = sum(nested.values())
            return f"{msg}, but its sub-folders hold {n} image(s): add --recursive"
    return msg + "; nothing written"


def select_ids(ids: list[str], wanted: Iterable[str]) -> list[str]:
    """The ids of `ids` that `--pages` names, in their order; all of them when it names none.

    Raises:
        InputError: `wanted` names an id none of this call's pages has (a typo), before anything is written.
    """
    wanted = set(wanted)
    if not wanted:
        return list(ids)
    missing = sorted(wanted.difference(ids))
    if missing:
        near = difflib.get_close_matches(missing[0], ids, n=1)
        hint = f"did you mean {near[0]}? " if near else ""
        raise InputError(f"--pages: unknown page id(s) {', '.join(missing)}; {hint}page ids are the page_id "
                         f"column of RUN/manifests/pages.jsonl (e.g. {ids[0] if ids else 'issue1__p1-3fa9c2d1'})")
    return [i for i in ids if i in wanted]

