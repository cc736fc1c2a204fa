"""Result rows: the row, the run key, the store, and `load(DIR)` -> a pandas DataFrame."""
from bench.results.key import RunKey, config_key
from bench.results.row import ResultRow
from bench.results.store import ResultStore


def load(directory):
    """Every run stored in a results folder as a pandas DataFrame (see `bench.results.frame`)."""
    from bench.results.frame import load as load_frame

    return load_frame(directory)


__all__ = ["ResultRow", "ResultStore", "RunKey", "config_key", "load"]
