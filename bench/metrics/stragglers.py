"""Stragglers: per configuration whose ranks timed their own work, each rank's own
time a step and how far the slowest is behind the median rank; one that is far behind holds every other rank back
at each all-reduce. Over repeated runs each rank's own time is its median over the runs, and the slowest rank and how
far it is behind are read from those medians, so that the sentence says what the table shows."""
from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench.metrics import Context, Metric, Part, Ranks, Reads, present
from bench.metrics.blocks import Block, table_section, text
from bench.results.frame import records_of
from bench.spec.rank_record import Result

if TYPE_CHECKING:
    import pandas as pd

STRAGGLER_BEHIND = 0.10  # a rank this far behind the median rank's own time is named as a straggler


def fold(ranks: Ranks) -> dict:
    """Each rank's own time a step (median over its windows), the slowest rank and how far it is behind the
    median rank: a straggler, which the windows (equal on every rank) hide. None unless every rank timed it."""
    own = {rank: 1000 * statistics.median(r.own_window_seconds) / r.window_steps
           for rank, r in ranks.results.items() if r.own_window_seconds}
    if len(own) < 2 or len(own) < len(ranks.results):
        return {"rank_times": None}
    median = statistics.median(own.values())
    slowest = max(own, key=own.get)
    return {"rank_times": {
        "own_ms": {str(r): round(ms, 3) for r, ms in sorted(own.items())}, "slowest_rank": slowest,
        "behind_median": round(own[slowest] / median - 1, 4) if median else None,
        "spread": round((own[slowest] - min(own.values())) / median, 4) if median else None}}


def found(configs: pd.DataFrame) -> list[dict]:
    """Per configuration whose ranks timed their own work (`fold`): each rank's own time a
    step, the slowest rank, how far it is behind the median rank, and whether that makes it a straggler."""
    if "rank_times.behind_median" not in configs:
        return []
    out = []
    for r in records_of(configs):
        behind = r.get("rank_times.behind_median")
        if not present(behind):
            continue
        own = {int(c.rsplit(".", 1)[1]): v for c, v in r.items() if c.startswith("rank_times.own_ms.") and present(v)}
        out.append({"label": r["key"].label, "own_ms": dict(sorted(own.items())),
                    "slowest": int(r["rank_times.slowest_rank"]), "behind": behind,
                    "straggler": behind > STRAGGLER_BEHIND})
    return out


def table(timed: list[dict]) -> pd.DataFrame:
    import pandas as pd

    def own(ms: dict[int, float]) -> str:
        shown = ", ".join(f"{rank}: {value:.2f}" for rank, value in list(ms.items())[:8])
        return shown + (f" … ({len(ms)} ranks)" if len(ms) > 8 else "")

    body = [[s["label"], own(s["own_ms"]), s["slowest"], f"{s['behind']:+.0%}",
             "yes: a straggler" if s["straggler"] else "no"] for s in timed]
    return pd.DataFrame(body, columns=["configuration", "own ms / step by rank", "slowest rank", "behind median",
                                       f"more than {STRAGGLER_BEHIND:.0%} behind"])


def lines(timed: list[dict]) -> list[str]:
    """One sentence per straggler, naming it."""
    return [f"{s['label']}: rank {s['slowest']} is a straggler, {s['behind']:.0%} behind the median rank "
            f"({s['own_ms'][s['slowest']]:.2f} ms of its own a step against the median rank's "
            f"{s['own_ms'][s['slowest']] / (1 + s['behind']):.2f}): it holds every other rank back at each "
            "all-reduce." for s in timed if s["straggler"]]


def section(part: Part) -> list[Block]:
    timed = found(part.configs)
    blocks = table_section("Stragglers", 3, (
        "A rank's own time a step is the part in which it waits for no other rank: its wait for the next "
        "batch and its forward pass (on GPUs, CUDA events around it). Window times cannot show a straggler: "
        "each step all-reduces and each window ends in a barrier, so they are equal on every rank. A "
        f"configuration whose slowest rank is more than {STRAGGLER_BEHIND:.0%} behind the median rank is "
        "named. Not measured where the forward all-gathers parameters (FSDP, ZeRO-3) or the step is one "
        "graph (TensorFlow)."), table(timed) if timed else None)
    return blocks + [text(*lines(timed))] if any(s["straggler"] for s in timed) else blocks


OWN = "rank_times.own_ms."


def derive(folded: pd.DataFrame, context: Context) -> None:
    """A configuration run several times: its slowest rank and how far behind the median rank it is, from each
    rank's median own time (one run's come from `fold`, the same way)."""
    columns = [c for c in folded.columns if c.startswith(OWN)]
    if not columns or "runs" not in folded:
        return
    for index, line in folded.iterrows():
        own = {int(c[len(OWN):]): line[c] for c in columns if present(line[c])}
        if not (present(line["runs"]) and line["runs"] > 1) or len(own) < 2:
            continue
        median = statistics.median(own.values())
        slowest = max(own, key=own.get)
        folded.at[index, "rank_times.slowest_rank"] = slowest
        folded.at[index, "rank_times.behind_median"] = own[slowest] / median - 1 if median else None


METRIC = Metric("stragglers", fold=fold, reads=(Reads(Result, ("own_window_seconds", "window_steps")),),
                row_fields=("rank_times",), repeats=((OWN, "median"),), derive=derive, section=section,
                notes=lambda configs: lines(found(configs)))
