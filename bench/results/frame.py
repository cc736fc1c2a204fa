"""Rows as a pandas DataFrame: one line per run, nested fields as dotted columns
(`throughput.median`, `task.name`), and `key` (a RunKey) to group by."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.results.key import config_key

if TYPE_CHECKING:
    import pandas as pd


def frame(rows: list[dict]) -> pd.DataFrame:
    """Rows (stored dicts or `ResultRow.to_dict()`s) -> one DataFrame line each, in order."""
    import pandas as pd  # here, so that `records_of` costs a metric module no pandas import

    if not rows:
        return pd.DataFrame(columns=["key"])
    runs = pd.json_normalize(rows, sep=".")
    runs["key"] = [config_key(r) for r in rows]
    runs["model_state_mb"] = [model_state_mb(r) for r in rows]
    runs["model_state_parts"] = [model_state_parts(r) for r in rows]
    # What one device held at its peak: the CUDA allocator's after warm-up, else the process's peak RSS.
    runs["device_peak_mb"] = [(r.get("memory") or {}).get("peak_allocated_mb") or r.get("peak_memory_mb")
                              for r in rows]
    # Where one process or rank per device reported each device's peak: device 0's against the others' largest
    # (DataParallel gathers the outputs on its device 0).
    by_device = [(r.get("memory") or {}).get("peak_allocated_mb_by_device") or [] for r in rows]
    runs["device0_peak_mb"] = [peaks[0] if len(peaks) > 1 else None for peaks in by_device]
    runs["other_devices_peak_mb"] = [max(peaks[1:]) if len(peaks) > 1 else None for peaks in by_device]
    return runs


def model_state_mb(row: dict) -> float | None:
    """The most model state (parameters + gradients + optimizer) any rank of the run held, MiB."""
    ranks = (row.get("memory") or {}).get("model_state_bytes") or {}
    totals = [sum(v for v in parts.values() if v) for parts in ranks.values()]
    return max(totals) / 2**20 if totals else None


def model_state_parts(row: dict) -> str | None:
    """Rank 0's parameters · gradients · optimizer state, MiB ("-": not resident), and ZeRO's fp32 master copy
    of the rank's partition where there is one ("+ 1.23 master")."""
    parts = ((row.get("memory") or {}).get("model_state_bytes") or {}).get("0")
    if not parts:
        return None
    text = " · ".join("-" if parts.get(k) is None else f"{parts[k] / 2**20:.2f}"
                      for k in ("parameters", "gradients", "optimizer"))
    return text + (f" + {parts['master_weights'] / 2**20:.2f} master" if parts.get("master_weights") else "")


def records_of(table: pd.DataFrame) -> list[dict]:
    """`table.to_dict("records")`: the same dicts, with the same native Python values, in half the time. pandas
    builds those a line at a time through `itertuples`; a column at a time (`Series.tolist`) is one conversion a
    column, which counts with a report's 200-odd columns and 30-odd calls."""
    columns = list(table.columns)
    values = [column.tolist() for _, column in table.items()]
    return [dict(zip(columns, line)) for line in zip(*values)]
