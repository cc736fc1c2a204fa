"""The store of a results folder: `results.jsonl`, one row a line, appended and never rewritten;
`results.csv` exported from it."""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from bench.results.row import ResultRow


def read_jsonl(path: Path) -> list[dict]:
    """A JSON-lines table (the microbenchmarks' allreduce.jsonl, peak.jsonl); empty when absent."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


class ResultStore:
    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.jsonl = self.directory / "results.jsonl"
        self.csv = self.directory / "results.csv"

    def append(self, row: ResultRow) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(row.to_dict(), default=str) + "\n").encode()
        # One O_APPEND write under an exclusive lock: concurrent sweeps never interleave.
        fd = os.open(self.jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self.export_csv()

    def dicts(self) -> list[dict]:
        """The stored lines as they were written."""
        if not self.jsonl.exists():
            return []
        return [json.loads(line) for line in self.jsonl.read_text().splitlines() if line.strip()]

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
