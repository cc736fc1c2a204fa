"""The pieces a report is built of (heading, text, table, ...): one list that report.md and report.html both
render (bench.report.report, bench.report.html).

They live beside the metrics, not in bench.analysis, because each metric writes its own report section in them
and nothing outside bench.analysis may import it (tests/test_structure.py).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One piece of the report: heading (text, level), text (markdown inline), bullets and notes (lines),
    headline ((title, its lines) per group), verdict ((title, sentences) per group), table (a DataFrame of cells),
    results (the configurations whose results table it is), image (a PNG's path)."""
    kind: str
    content: object
    level: int = 0


def heading(text: str, level: int) -> Block:
    return Block("heading", text, level)


def text(*lines: str) -> Block:
    return Block("text", "\n".join(lines))


def table_section(title: str, level: int, explanation: str, table) -> list[Block]:
    """A table under its heading and what it shows; nothing where there is no table (None)."""
    return [] if table is None else [heading(title, level), text(explanation), Block("table", table)]
