"""The store of a results folder: `results.jsonl`, one row a line, appended and never rewritten;
`results.csv` exported from it."""
from __future__ import annotations

import json
import os
from pathlib import Path

from bench.results.jsonl import RESULTS, append_line, read_jsonl
from bench.results.row import ResultRow

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
            append_line(self.jsonl, row.to_dict())
            self.export_csv()
        except OSError as exc:
            raise StoreError(f"cannot write to {self.directory}: {exc.strerror or exc}: free space there or pass "
                             f"--out elsewhere; the row follows, append it to {self.jsonl.name} by hand",
                             json.dumps(row.to_dict(), default=str)) from exc

    def dicts(self) -> list[dict]:
        """The stored rows as they were written (a torn line skipped with a warning)."""
        return read_jsonl(self.jsonl)

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
