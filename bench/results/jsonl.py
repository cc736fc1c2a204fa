"""JSON-lines tables (results.jsonl, the microbenchmarks' allreduce.jsonl and peak.jsonl, the ranks' reports):
read tolerating a torn line, appended one whole line at a time."""
from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path

from bench.interrupt import held

RESULTS = "results.jsonl"  # a results folder's rows
SEARCH = "search"  # bench tune's short runs, a results folder of their own inside the tuned one: never ranked
log = logging.getLogger(__name__)
_warned: set[tuple[Path, int]] = set()


def read_jsonl(path: Path) -> list[dict]:
    """A JSON-lines table (results.jsonl, the microbenchmarks' allreduce.jsonl, peak.jsonl); empty when
    absent. A torn or corrupt line (a kill or a full disk during an append) is skipped with one warning
    naming file and line; every complete line is kept."""
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif (path.resolve(), number) not in _warned:
            _warned.add((path.resolve(), number))
            log.warning("warning: %s line %d is not a complete row (a torn or corrupt write): skipped",
                        path, number)
    return rows


def append_line(path: Path, doc: dict, unless: str | None = None) -> bool:
    """Append one row as one write of a complete line, flushed to disk, under an exclusive lock (concurrent
    sweeps never interleave); after a torn tail it starts on a fresh line; a write that fails leaves the file
    as it was. Stop signals wait until it is done. `unless`: a field (run_id) whose value a complete line holds
    already means the row is there, and it is not appended again. Whether it was appended."""
    line = (json.dumps(doc, default=str) + "\n").encode()
    with held():
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if unless is not None and _holds(os.pread(fd, size, 0), unless, doc.get(unless)):
                return False
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            try:
                written = os.write(fd, line)
                if written < len(line):  # a full disk takes what fits: the rest raises
                    os.write(fd, line[written:])
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)  # no torn line left behind
                raise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    return True


def _holds(text: bytes, field: str, value) -> bool:
    """Whether a complete line of this table has `value` in `field` (read under the appender's lock)."""
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:  # a torn line, not a row
            continue
        if isinstance(row, dict) and row.get(field) == value:
            return True
    return False
