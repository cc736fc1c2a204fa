"""A results folder read once and folded once: its rows, one line a run, one line a configuration (repeats
folded, every metric derived), and the files beside them that the report reads (the measured peak, the fast-path
audit). Each command that reads a folder (`bench sweep`, `run`, `report`, `compare`, `project`, `maxbatch`, one
stopped by a signal) builds one `Folder` per folder and hands it to the table, the report with its plots and
projection, the verdict and MLflow; the sweep's provisional answer, halfway, reads the folder as it stands then."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis import aggregate, fast_path
from bench.results import ResultStore, peak
from bench.results.fast_path import load as load_audit
from bench.results.frame import frame


@dataclass(frozen=True)
class Folder:
    directory: Path
    rows: list[dict]         # as stored, each brought to this version's layout
    runs: pd.DataFrame       # one line a run (bench.results.frame)
    configs: pd.DataFrame    # one line a configuration (bench.analysis.aggregate)
    peaks: list[dict]        # the measured peak (peak.jsonl)
    audit: list[dict]        # the fast-path audit (fast_path.jsonl)

    @classmethod
    def read(cls, directory: str | Path, settings: dict | None = None) -> Folder:
        """`settings`: the metrics' options (bench.metrics.settings: a price per device-hour)."""
        directory = Path(directory)
        rows = ResultStore(directory).dicts()
        runs = frame(rows)
        peaks = peak.load(directory)
        return cls(directory, rows, runs, aggregate.configurations(runs, peaks, settings), peaks,
                   load_audit(directory))

    @property
    def warnings(self) -> list[str]:
        """Where a run was off its framework's fast path (bench.analysis.fast_path)."""
        return fast_path.warnings(self.rows, self.audit)

    @property
    def environment(self) -> dict:
        """The environment of the last row, as stored (nested)."""
        return self.rows[-1].get("environment", {}) if self.rows else {}
