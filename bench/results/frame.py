"""Rows as a pandas DataFrame: one line per run, nested fields as dotted columns
(`throughput.median`, `task.name`), and `key` (a RunKey) to group by."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from bench.results.key import config_key


def frame(rows: list[dict]) -> pd.DataFrame:
    """Rows (stored dicts or `ResultRow.to_dict()`s) -> one DataFrame line each, in order."""
    if not rows:
        return pd.DataFrame(columns=["key"])
    runs = pd.json_normalize(rows, sep=".")
    runs["key"] = [config_key(r) for r in rows]
    return runs


def load(directory: str | os.PathLike) -> pd.DataFrame:
    """Every run stored in a results folder (its `results.jsonl`), for a notebook:

        from bench import results
        runs = results.load("results/reference-cpu")
        runs.groupby("key")["throughput.median"].median()
    """
    from bench.results.store import ResultStore

    return frame(ResultStore(Path(directory)).dicts())
