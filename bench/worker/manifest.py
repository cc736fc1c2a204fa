"""A checkpoint's manifest: every file the save wrote, with its size and SHA-256, written by rank 0 once the save
is complete (MANIFEST.json beside the files) and removed before the next save begins, so that it only ever
vouches for a whole save. `--resume-from` checks it before anything starts: a checkpoint truncated, edited or
half-copied since is refused in one line instead of failing inside a rank. A checkpoint without one (a save
interrupted before it, or written before manifests were) is not checked."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

NAME = "MANIFEST.json"


def _files(directory: Path) -> dict[str, dict]:
    out = {}
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith((NAME, f".{NAME}"))):
        digest, size = hashlib.sha256(), 0
        try:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
                    size += len(block)
        except FileNotFoundError:  # a framework's scratch file, removed as it was listed: not part of the save
            continue
        out[path.relative_to(directory).as_posix()] = {"bytes": size, "sha256": digest.hexdigest()}
    return out


def write(directory: Path, epochs_done: int) -> None:
    """Atomically: a reader sees the previous manifest or this one, never a torn one."""
    scratch = directory / f".{NAME}.{os.getpid()}"
    scratch.write_text(json.dumps({"epochs_done": epochs_done, "files": _files(directory)}, indent=1))
    os.replace(scratch, directory / NAME)


def damage(directory: Path) -> str | None:
    """What differs from the manifest (None: intact, or a checkpoint saved before manifests were written)."""
    path = directory / NAME
    if not path.exists():
        return None
    try:
        files = json.loads(path.read_text())["files"]
        expected = {str(name): (int(f["bytes"]), str(f["sha256"])) for name, f in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return f"its {NAME} cannot be read ({type(exc).__name__})"
    found = {name: (f["bytes"], f["sha256"]) for name, f in _files(directory).items()}
    missing = sorted(set(expected) - set(found))
    changed = sorted(n for n in set(expected) & set(found) if expected[n] != found[n])
    added = sorted(set(found) - set(expected))
    for what, names in (("missing", missing), ("changed", changed), ("not saved with it", added)):
        if names:
            more = f" and {len(names) - 1} more" if len(names) > 1 else ""
            return f"{names[0]!r}{more} {what} since it was saved"
    return None
