"""Result rows: the row, the run key, the store, and `load(DIR)` -> a pandas DataFrame."""
from bench.results.key import RunKey, config_key
from bench.results.row import ResultRow
from bench.results.store import ResultStore


def load(directory):
    """Every run stored in a results folder (its `results.jsonl`) as a pandas DataFrame, for a notebook:

        from bench import results
        runs = results.load("results/reference-cpu")
        runs.groupby("key")["throughput.median"].median()

    (see `bench.results.frame` for its columns)."""
    from bench.results.frame import frame  # pandas: only when a frame is asked for

    return frame(ResultStore(directory).dicts())


__all__ = ["ResultRow", "ResultStore", "RunKey", "config_key", "load"]
