"""The fast-path audit's table in a results folder (OUT/fast_path.jsonl, measured by bench.studies.audit), and what
one switch's figures say: whether dtbench's setting of it is the faster one here."""
from __future__ import annotations

from pathlib import Path

from bench.results.jsonl import read_jsonl

FILE = "fast_path.jsonl"
NOISE = 0.05  # a switch moves throughput only where every pair moved it by more than this


def load(out_dir: Path) -> list[dict]:
    return read_jsonl(out_dir / FILE)


def off_the_fast_path(row: dict) -> str | None:
    """The words for a switch whose other setting was faster here in every pair (None where dtbench's setting
    is the faster, or the pairs disagree)."""
    if row.get("ratio") is None:
        return None
    low, high = row["ratio_low"], row["ratio_high"]
    if row["chosen"] and high < 1 - NOISE:
        return (f"{row['switch']} was on, and {row['variant']} trained {1 / row['ratio']:.2f}x faster with it off here "
                f"(export {row['env']}=0 to run without it)")
    if not row["chosen"] and low > 1 + NOISE:
        return (f"{row['switch']} was off, and {row['variant']} trained {row['ratio']:.2f}x faster with it on here "
                f"(export {row['env']}=1 to run with it)")
    return None
