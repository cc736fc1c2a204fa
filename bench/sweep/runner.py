"""A sweep: the planned runs (`bench.sweep.plan`), checked up front, run one after another into one store."""
from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Callable

from bench.interrupt import Interrupted
from bench.results import ResultRow, ResultStore
from bench.status import Status
from bench.worker import MODEL_DIR, data
from bench.run import environment as env_info
from bench.run.execute import base_row, execute, interrupted_row, new_run_id
from bench.sweep.forecast import Forecast, earlier_rows
from bench.sweep.plan import check_all
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine

log = logging.getLogger(__name__)


def run_all(specs: list[RunSpec], out_dir: Path, machine: Machine, mlflow_uri: str | None = None,
            after_run: Callable[[int], None] | None = None) -> list[ResultRow]:
    """Each run in turn into the folder's store; `after_run(n)` once the n-th run's row is stored."""
    check_all(specs, machine)
    if mlflow_uri:
        from bench.sweep import tracking

        tracking.require()
        # Rank 0 of each run saves its trained model for the MLflow run (bench.worker.Worker.save_model).
        specs = [dataclasses.replace(spec, log_model=True) for spec in specs]
    store = ResultStore(out_dir)
    environment = env_info.environment()
    data_paths = {spec.task: data.prepare(spec.task) for spec in specs}
    rows, started, forecast = [], time.time(), Forecast(earlier_rows(specs, store))
    try:
        for index, spec in enumerate(specs, 1):
            elapsed, eta = time.time() - started, forecast.remaining(specs[index - 1:])
            log.info("[%d/%d] %s  (elapsed %.0fs%s)", index, len(specs), spec.key.label, elapsed,
                     f", ETA {eta:.0f}s" if eta is not None else "")
            run_started = time.time()
            row = run_one(spec, store, out_dir, machine, data_paths[spec.task], environment)
            if row.status != Status.SKIPPED:
                calibrated = forecast.scale() is not None
                forecast.add(spec, time.time() - run_started)
                if not calibrated and forecast.scale() is not None:
                    _calibrated(forecast, specs[index:])
            rows.append(row)
            if mlflow_uri:
                _track(mlflow_uri, row, out_dir)
            log.info("      -> %s%s", row.status, f": {row.error.splitlines()[0]}" if row.error else "")
            if after_run:
                after_run(index)
    except Interrupted as stop:  # the caller prints what finished and exits 128 + the signal
        stop.rows = rows + stop.rows
        raise
    return rows


def _calibrated(forecast: Forecast, rest: list[RunSpec]) -> None:
    """Once the first run of a configuration the earlier rows hold has finished: the whole sweep at this machine's
    scale."""
    left = forecast.remaining(rest)
    if left is not None:
        ends = time.strftime("%H:%M", time.localtime(time.time() + left))
        log.info("      calibrated on this machine: %.2fx the earlier rows' time; about %.0f min of runs to go "
                 "(done about %s)", forecast.scale(), left / 60, ends)


def run_one(spec: RunSpec, store: ResultStore, out_dir: Path, machine: Machine, data_path: Path | None,
            environment: dict) -> ResultRow:
    """Run one configuration (or record why it does not apply) and store its row."""
    reason = spec.inapplicable()
    if reason:
        row = base_row(spec, new_run_id(spec), Status.SKIPPED, f"not applicable: {reason}")
        row.environment = environment
        store.append(row)
        return row
    try:
        return execute(spec, out_dir, machine, data_path, environment, store)  # its row stored
    except Interrupted as stop:  # recorded by execute, its processes killed: stop the sweep
        if not stop.rows:  # stopped before execute had a run to record
            stop.rows = [interrupted_row(spec, stop, environment)]
            store.append(stop.rows[0])
        log.info("      -> interrupted (%s)", stop.name)
        raise


def _track(uri: str, row: ResultRow, out_dir: Path) -> None:
    """After the row is stored: a tracking server that is down must not cost a measurement. The figures derived
    from the whole folder follow when the command ends (tracking.log_derived)."""
    from bench.sweep import tracking

    try:
        log.info("      mlflow: %s", tracking.log_row(uri, row, out_dir / "runs" / row.run_id / MODEL_DIR))
    except Exception as exc:  # noqa: BLE001 - any tracking failure is a warning, not a lost run
        log.warning("      mlflow: could not log %s: %s", row.run_id, exc)
