"""The store of a results folder: `results.jsonl`, one row a line, appended and never rewritten, the source of
truth; `results.csv` and `results.parquet` exported from it once a command has read the folder (bench.analysis.folder),
never per row."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from bench.results.jsonl import RESULTS, append_line, read_jsonl
from bench.results.row import ResultRow, malformed, migrate, unknown_fields

log = logging.getLogger(__name__)


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
        self.parquet = self.directory / "results.parquet"

    def append(self, row: ResultRow | dict, once: bool = False) -> bool:
        """One line, flushed and synced (bench.results.jsonl): the standard library only, so that the run's
        watchdog can append through the store too. `once`: not where a row of its run id is stored already (the
        watchdog of a harness killed after appending the run's row). Whether it was appended."""
        data = row.to_dict() if isinstance(row, ResultRow) else row
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            return append_line(self.jsonl, data, unless="run_id" if once else None)
        except OSError as exc:
            raise StoreError(f"cannot write to {self.directory}: {exc.strerror or exc}: free space there or pass "
                             f"--out elsewhere; the row follows, append it to {self.jsonl.name} by hand",
                             json.dumps(data, default=str)) from exc

    def dicts(self) -> list[dict]:
        """The stored rows, each brought to this version's layout (a torn line skipped with a warning); fields
        this version does not know are kept, and named once."""
        rows = [migrate(d) for d in read_jsonl(self.jsonl) if not self._foreign(d)]
        unknown = set().union(*map(unknown_fields, rows)) if rows else set()
        if unknown:
            log.warning("%s: rows carry fields this dtbench does not know (a newer one wrote them?), kept as "
                        "they are: %s", self.jsonl, ", ".join(sorted(unknown)))
        return rows

    def _foreign(self, data: dict) -> bool:
        """A complete JSON line that is no row (a hand edit, another tool's line): skipped with one warning."""
        reason = malformed(data)
        if reason:
            log.warning("warning: %s: a line is not a dtbench row (%s): skipped", self.jsonl, reason)
        return reason is not None

    def rows(self) -> list[ResultRow]:
        return [ResultRow.from_dict(d) for d in self.dicts()]

    def export_tables(self, runs) -> None:
        """`runs`: the folder's runs as read (bench.results.frame), written as results.csv (a list as JSON text:
        one readable cell) and results.parquet (lists kept as lists, for pandas, Polars, DuckDB, Spark)."""
        if runs.empty:
            return
        runs = runs.drop(columns="key")
        _replace(self.csv, lambda path: runs.map(_as_text).to_csv(path, index=False))
        _replace(self.parquet, lambda path: _columnar(runs).to_parquet(path, index=False))


def _replace(path: Path, write) -> None:
    """Written beside, then moved over: a reader never sees half a file."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    write(tmp)
    os.replace(tmp, path)


def _as_text(value):
    return json.dumps(value) if isinstance(value, list) else value


def _columnar(runs):
    """The runs with each column Arrow can type as it is; a column it cannot (lists of mixed kinds, which rows of
    older layouts can hold) as JSON text."""
    import pyarrow as pa

    runs = runs.copy()
    for column in runs.columns[runs.dtypes == object]:
        try:
            pa.array(runs[column], from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            runs[column] = runs[column].map(_as_text)
    return runs
