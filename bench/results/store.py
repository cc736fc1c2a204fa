"""The store of a results folder: `results.jsonl`, one row a line, appended and never rewritten;
`results.csv` exported from it."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from bench.results.jsonl import RESULTS, append_line, read_jsonl
from bench.results.row import ResultRow, malformed, migrate, unknown_fields

log = logging.getLogger(__name__)
# Each results.jsonl read once per process: its rows as of (size, mtime), kept up to date by this process's own
# appends; a change by anything else (another process, a hand edit) reads it again.
_loaded: dict[Path, tuple[tuple[int, int] | None, list[dict]]] = {}


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


class StoreError(RuntimeError):
    """The results folder cannot take a row (full disk, no permission); the row's line is kept in `line`."""

    def __init__(self, message: str, line: str):
        super().__init__(message)
        self.line = line


class ResultStore:
    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.jsonl = self.directory / RESULTS
        self.csv = self.directory / "results.csv"

    def append(self, row: ResultRow) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path, before = self.jsonl.resolve(), _stamp(self.jsonl)
            append_line(self.jsonl, row.to_dict())
            known = _loaded.get(path)
            if known is not None and known[0] == before:  # what was read is the file up to this line
                _loaded[path] = (_stamp(self.jsonl), [*known[1], migrate(row.to_dict())])
            self.export_csv()
        except OSError as exc:
            raise StoreError(f"cannot write to {self.directory}: {exc.strerror or exc}: free space there or pass "
                             f"--out elsewhere; the row follows, append it to {self.jsonl.name} by hand",
                             json.dumps(row.to_dict(), default=str)) from exc

    def dicts(self) -> list[dict]:
        """The stored rows, each brought to this version's layout (a torn line skipped with a warning); fields
        this version does not know are kept, and named once."""
        path, stamp = self.jsonl.resolve(), _stamp(self.jsonl)
        known = _loaded.get(path)
        if known is None or known[0] != stamp:
            rows = [migrate(d) for d in read_jsonl(self.jsonl) if not self._foreign(d)]
            unknown = set().union(*map(unknown_fields, rows)) if rows else set()
            if unknown:
                log.warning("%s: rows carry fields this dtbench does not know (a newer one wrote them?), kept as "
                            "they are: %s", self.jsonl, ", ".join(sorted(unknown)))
            known = _loaded[path] = (stamp, rows)
        return [dict(row) for row in known[1]]

    def _foreign(self, data: dict) -> bool:
        """A complete JSON line that is no row (a hand edit, another tool's line): skipped with one warning."""
        reason = malformed(data)
        if reason:
            log.warning("warning: %s: a line is not a dtbench row (%s): skipped", self.jsonl, reason)
        return reason is not None

    def rows(self) -> list[ResultRow]:
        return [ResultRow.from_dict(d) for d in self.dicts()]

    def export_csv(self) -> None:
        from bench.results.frame import frame  # pandas: only when a CSV is written

        runs = frame(self.dicts())
        if runs.empty:
            return
        tmp = self.csv.with_suffix(f".csv.tmp{os.getpid()}")
        # Lists (raw windows, notes) as JSON text: one readable cell each.
        runs = runs.drop(columns="key").map(lambda v: json.dumps(v) if isinstance(v, list) else v)
        runs.to_csv(tmp, index=False)
        os.replace(tmp, self.csv)
