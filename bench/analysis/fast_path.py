"""Which kernels each framework trained with, from its rows (environment["kernels"], recorded by every rank when
it joined), the fast-path audit's section (bench.studies.audit), and the warnings a verdict carries when a framework
ran off its fast path."""
from __future__ import annotations

import pandas as pd

from bench.metrics.blocks import Block, table_section
from bench.results.fast_path import off_the_fast_path
from bench.spec import frameworks
from bench.spec.models import framework_name
from bench.spec.variants import family_of


def _by_family(rows: list[dict]) -> dict[str, dict]:
    """The last row of each family that recorded its kernels (PyTorch's wrappers train with PyTorch's)."""
    return {family_of(row["framework"]): row for row in rows if (row.get("environment") or {}).get("kernels")}


def kernel_lines(rows: list[dict]) -> list[str]:
    """One line per framework: the instruction set it dispatched to and the kernel libraries it used."""
    lines = []
    for family, row in _by_family(rows).items():
        k, switches = row["environment"]["kernels"], row.get("fast_path") or {}
        mode = "as shipped" if row.get("as_shipped") else "dtbench's fast path"
        summary = frameworks.get(family).kernel_summary
        parts = frameworks.load(summary)(k, switches) if summary else []
        isa = ", ".join(k.get("cpu_isa") or []) or "-"
        lines.append(f"{framework_name(family)} ({mode}): {'; '.join(parts)}; CPU offers {isa}")
    return lines


def audit_table(audit: list[dict]) -> pd.DataFrame:
    """The audit: per switch the two sides' run medians, their ratio and dtbench's choice."""
    def rate(values: list[float]) -> str:
        return " / ".join(f"{v:,.0f}" for v in values) or "-"

    return pd.DataFrame([{
        "framework": framework_name(family_of(r["framework"])), "switch": r["switch"],
        "on (samples/s)": rate(r["on"]), "off (samples/s)": rate(r["off"]),
        "on / off": "-" if r["ratio"] is None else f"{r['ratio']:.2f}x [{r['ratio_low']:.2f}, {r['ratio_high']:.2f}]",
        "dtbench runs it": "on" if r["chosen"] else "off",
        "here": off_the_fast_path(r) and "the other setting is faster" or (
            "failed: " + "; ".join(r["errors"]) if r.get("errors") else "dtbench's setting holds"),
    } for r in audit])


def section(audit: list[dict]) -> list[Block]:
    return table_section("Fast path on this machine", 2, (
        "Each switch that decides a framework's kernels, measured here on and off: the framework's plain "
        "single-device loop on this task with synthetic input, two runs a side (on, off, off, on), each run's "
        "median over its windows; the ratio's range is over the two pairs. Measured once per machine (CPU, its "
        "instruction sets, library versions) and reused. A switch counts as faster the other way only where "
        "both pairs say so by more than 5 %; the verdict then names it."), audit_table(audit) if audit else None)


def warnings(rows: list[dict], audit: list[dict]) -> list[str]:
    """What the verdict must say before its ranking: a framework that ran as shipped where that is off its fast
    path here, and a switch the audit found faster the other way."""
    out = []
    for family, row in _by_family(rows).items():
        k = row["environment"]["kernels"]
        if row.get("as_shipped") and "onednn" in k and "onednn_switch" in k and not k["onednn"]:
            out.append(f"{framework_name(family)} ran as shipped, without its oneDNN kernels: on this CPU that is "
                       "not its fast path, and its ranking is that of a configuration, not of the framework (see the "
                       "fast-path table).")
    out += [f"Off the fast path: {w}." for r in audit if (w := off_the_fast_path(r))]
    return out
