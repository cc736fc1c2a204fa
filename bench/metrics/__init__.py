"""The figures of a configuration, one module each, and the registry the folds, the table and the verdict loop
over.

A metric owns its figures' whole life: how the ranks' reports of one run fold into its fields of the row
(`bench.run.fold`: the records' fields it reads, `Reads`, and the row's fields it fills), how its columns fold over
repeated runs and what it derives from the folded line (once, when a report is made:
`bench.analysis.aggregate.configurations`), its columns in the results table, its section of the
report under each task's results table (its table and what the table says), the command-line options it reads,
and the fact the verdict states about a winner.

- throughput: the headline (samples/s, its interval) and per device.
- scaling: scaling efficiency against the variant's own 1-device run and against the framework's plain loop.
- timing: step time, start-up.
- accuracy: test accuracy over the whole test set, the samples evaluated, time to the target accuracy.
- memory: the peaks, folded as the largest over runs; the model state per rank.
- utilisation: TFLOP/s, MFU (the data-sheet peak), the fraction of the measured peak, and where the rest goes.
- stragglers: each rank's own time a step, and the rank far behind the others that holds them back.
- cost: what a configuration's training costs at a price per device-hour (`--price-per-device-hour`).
- host_cpu: the host CPU time each training sample costs, all ranks' processes together.
"""
from __future__ import annotations

import argparse
import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from bench.spec.rank_record import RankRecord, Record, Result
from bench.spec.setting import Setting

if TYPE_CHECKING:  # pandas only where figures are folded: the command line imports the metrics' options
    import pandas as pd

    from bench.metrics.blocks import Block
    from bench.results.key import RunKey


def present(value) -> bool:
    """A figure is there: not None, NaN or pandas' NA (a list or a dict is there)."""
    import pandas as pd

    return value is not None and not (pd.api.types.is_scalar(value) and pd.isna(value))


def fmt(value, spec: str = ".0f", none: str = "-") -> str:
    """A figure as a table's cell prints it: `none` where it is not there."""
    return format(value, spec) if present(value) else none


@dataclass(frozen=True)
class Column:
    """One column of the results table: its header, its value in a configuration's line, how it is printed
    (a format spec, or `cell` for a text of its own) and which way is better (None: no best to mark)."""
    header: str
    name: str
    fmt: str
    higher_is_better: bool | None = None
    cell: Callable[[dict], str] | None = None

    def value(self, line: dict):
        return line.get(self.name)


@dataclass(frozen=True)
class Ranks:
    """One run's ranks as they reported it (their records, bench.spec.rank_record): what a metric's `fold` reads
    to fill its fields of the row. `results` holds each reporting rank's result, rank 0's among them."""
    results: dict[int, Result]
    records: dict[int, list[RankRecord]]
    world_size: int
    launch_time: float

    @property
    def main(self) -> Result:
        """Rank 0's result: the windows are timed there (equal on every rank: each ends in a barrier)."""
        return self.results[0]

    def events(self, kind: type[Record], rank: int | None = None) -> list[Record]:
        """The records of one kind of one rank, or of every reporting rank."""
        ranks = self.results if rank is None else [rank]
        return [r for k in ranks for r in self.records.get(k, []) if isinstance(r, kind)]


@dataclass(frozen=True)
class Reads:
    """The fields of one kind of rank record a metric's fold reads (tests/test_rank_record.py holds it to them)."""
    record: type[RankRecord]
    fields: tuple[str, ...]


@dataclass(frozen=True)
class Context:
    """What deriving needs beyond the folded lines: the folder's measured peaks, the metrics' options."""
    peaks: list[dict] | None = None
    settings: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """One part of the report (a task at a precision and a scaling): what a metric's section reads there."""
    configs: pd.DataFrame  # the part's lines of the configurations frame: its results table
    profiles: dict = field(default_factory=dict)  # each run key's latest profile (bench.report.profiles.latest)
    # Two run keys' throughput ratio with its 95 % interval (bench.analysis.repeats.Ratio), None unless both were
    # measured: the report's statistics, handed in because bench.metrics may not import the analysis.
    ratio: Callable[[RunKey, RunKey], object | None] = lambda key, other: None


@dataclass(frozen=True)
class Metric:
    name: str
    # Its fields of the row (bench.results.row.ResultRow) from one run's ranks' reports: what the fold reads of
    # them, and the row's fields it returns.
    fold: Callable[[Ranks], dict] | None = None
    reads: tuple[Reads, ...] = ()
    row_fields: tuple[str, ...] = ()
    # Its columns of the configurations frame, there (empty) even where no run has them.
    figures: tuple[str, ...] = ()
    columns: tuple[Column, ...] = ()
    # How each of its columns folds over a configuration's repeated runs: "median" or "max"; a name ending in "."
    # stands for every column under it.
    repeats: tuple[tuple[str, str], ...] = ()
    # A fold over repeats that is more than one column's median or largest: (the runs that finished ok, the
    # configuration's line to fill).
    fold_repeats: Callable[[pd.DataFrame, pd.Series], None] | None = None
    # Its figures from the folded lines (the whole frame: an efficiency reads another configuration's line), and
    # which of its figures those are (MLflow logs them once the sweep is over).
    derive: Callable[[pd.DataFrame, Context], None] | None = None
    derived: tuple[str, ...] = ()
    options: tuple[Setting, ...] = ()  # on `bench run`, `sweep` and `report`; their values reach `derive`
    # Its section under each task's results table: its blocks, [] where the part has nothing of it to show.
    section: Callable[[Part], list[Block]] | None = None
    # A fact about a group's winner for the verdict's sentence, or None.
    fact: Callable[[dict], str | None] | None = None
    # What the verdict's notes say of the configurations (a straggler named, a device 0 that bounds the batch).
    notes: Callable[[pd.DataFrame], list[str]] | None = None


# The order of the results table's columns and of the sections under it.
MODULES = ("throughput", "scaling", "timing", "accuracy", "memory", "utilisation", "host_cpu", "stragglers", "cost")
REGISTRY: tuple[Metric, ...] = tuple(importlib.import_module(f"bench.metrics.{m}").METRIC for m in MODULES)


def columns(line: dict) -> list[Column]:
    """The results table's columns for a frame whose lines look like `line`: a column whose figure the frame
    does not have at all (cost without a price) is left out."""
    return [c for m in REGISTRY for c in m.columns if c.name in line]


def fold(ranks: Ranks) -> dict:
    """One run's row fields, every metric's from the ranks' reports."""
    return {name: value for m in REGISTRY if m.fold for name, value in m.fold(ranks).items()}


def figures() -> tuple[str, ...]:
    return tuple(name for m in REGISTRY for name in m.figures)


def derived() -> tuple[str, ...]:
    return tuple(name for m in REGISTRY for name in m.derived)


def repeat_folds() -> dict[str, str]:
    return {column: how for m in REGISTRY for column, how in m.repeats}


def fold_repeats(ok: pd.DataFrame, line: pd.Series) -> None:
    """A configuration's runs that finished ok into its line: each metric's columns as it says."""
    for metric in REGISTRY:
        if metric.fold_repeats:
            metric.fold_repeats(ok, line)
    for declared, how in repeat_folds().items():
        # A name ending in "." folds every column under it (one a rank: rank_times.own_ms.0, .1, ...).
        for column in [c for c in ok.columns if c.startswith(declared)] if declared.endswith(".") else [declared]:
            if column in ok:
                line[column] = ok[column].median() if how == "median" else ok[column].max()


def derive(folded: pd.DataFrame, context: Context) -> None:
    for metric in REGISTRY:
        if metric.derive:
            metric.derive(folded, context)


def sections(part: Part) -> list[Block]:
    return [block for m in REGISTRY if m.section for block in m.section(part)]


def facts(winner: dict) -> list[str]:
    return [f for m in REGISTRY if m.fact and (f := m.fact(winner))]


def notes(configs: pd.DataFrame) -> list[str]:
    return [line for m in REGISTRY if m.notes for line in m.notes(configs)]


def options() -> list[Setting]:
    """Every metric's command-line options (bench.spec.setting generates them)."""
    return [o for m in REGISTRY for o in m.options]


def settings(args: argparse.Namespace) -> dict:
    """The metrics' options as the command line gave them (those not given left out)."""
    return {o.dest: getattr(args, o.dest) for m in REGISTRY for o in m.options
            if getattr(args, o.dest, None) is not None}
