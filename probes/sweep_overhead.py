"""The harness's own time in a sweep, outside the runs: `bench sweep` over synthetic runs (each row made from its
spec, nothing trained), with and without `--mlflow`, at several run counts. Whether that time grows linearly with
the runs (each run logged once, the folder folded once at the end) or faster (the folder refolded after every run).
Prints one JSON line per sweep.

    python -m probes.sweep_overhead --rounds 4,14 [--mlflow]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def synthetic_run(spec, out_dir, machine, data_path, environment=None):
    from bench.run.execute import base_row, new_run_id
    from bench.status import Status

    row = base_row(spec, new_run_id(spec), Status.OK)
    median = 1000.0 * spec.world_size ** 0.9
    row.throughput = {"median": median, "ci_low": 0.98 * median, "ci_high": 1.02 * median,
                      "windows": [0.99 * median, median, 1.01 * median]}
    row.per_device_throughput, row.test_accuracy, row.environment = median / spec.world_size, 0.9, environment
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", default="4,14", help="sweeps of this many rounds of 3 runs each")
    p.add_argument("--mlflow", action="store_true", help="log every run to a fresh SQLite MLflow store")
    args = p.parse_args()
    import contextlib
    import io
    import os

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    from bench import cli
    from bench.sweep import runner

    runner.execute = synthetic_run

    def sweep(rounds: int) -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out"
            extra = ["--mlflow", f"sqlite:///{Path(tmp) / 'mlflow.db'}"] if args.mlflow else []
            started = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                code = cli.main(["sweep", "--variants", "torch-single,torch-ddp", "--max-devices", "2", "--task",
                                 "quick", "--no-analysis", "--repeats", str(rounds), "--out", str(out), *extra])
            seconds = time.perf_counter() - started
            runs = (out / "results.jsonl").read_text().count("\n")
        return {"runs": runs, "mlflow": args.mlflow, "exit": code, "seconds": round(seconds, 2),
                "seconds_per_run": round(seconds / runs, 3)}

    sweep(1)  # the first sweep of a process also pays its imports and (--mlflow) the store's schema: not reported
    for rounds in [int(r) for r in args.rounds.split(",")]:
        print(json.dumps(sweep(rounds)), flush=True)

if __name__ == "__main__":
    main()
