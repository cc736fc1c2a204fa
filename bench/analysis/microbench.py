"""Running a microbenchmark (all-reduce, matmul peak) as a run of its own, and its JSON-lines table."""
from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from pathlib import Path

from bench.run.execute import start_and_wait
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine

log = logging.getLogger(__name__)


def run(spec: RunSpec, event: str, out_dir: Path, machine: Machine) -> dict | None:
    """Launch it like a training run (same pinning, launcher, clean-up); rank 0's `event` record, or
    None (with a warning) when it failed."""
    launched = start_and_wait(spec, out_dir, machine, data_path=None)
    events = [r for r in launched.records.get(0, []) if r["event"] == event]
    if launched.status != "ok" or not events:
        log.warning("%s benchmark %s failed: %s", event, spec.key.label,
                    (launched.reason or "no result").splitlines()[0])
        return None
    return events[0]


def append(path: Path, rows: list[dict]) -> list[dict]:
    """Append rows (stamped with the time) to a JSON-lines table; return them."""
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = [{"started_at": stamp, **r} for r in rows]
    with open(path, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return rows


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
