"""The largest batches `bench maxbatch` found (bench.studies.maxbatch) in a results folder: OUT/maxbatch/maxbatch.jsonl,
one line a search."""
from __future__ import annotations

from pathlib import Path

from bench.results.jsonl import read_jsonl

SUMMARY = "maxbatch.jsonl"


def load(out_dir: Path) -> list[dict]:
    return read_jsonl(Path(out_dir) / SUMMARY)
