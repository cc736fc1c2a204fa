"""Where the profiled step goes (`--profile`): each configuration's latest profiled run cut into the same
categories for every framework (bench.worker.profile), and why the verdict's winner is faster than each
approach it beats, category by category, with the operations that take the most time on each side; and the
report's section that shows both.
"""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt
from bench.metrics.blocks import Block, heading, table_section, text
from bench.results.frame import records_of
from bench.results.key import RunKey
from bench.status import Status
from bench.worker.profile import CATEGORIES

SHOWN_DIFFERENCE_MS = 0.5  # a category whose step time differs by less is left out of the explanation


def latest(runs: pd.DataFrame) -> dict[RunKey, dict]:
    """Each configuration's last profiled ok run: its profile as the row stored it, and the trace's path."""
    if runs.empty or "profile.step_ms" not in runs:
        return {}
    out = {}
    for r in records_of(runs[(runs["status"] == Status.OK) & runs["profile.step_ms"].notna()]):
        out[r["key"]] = {
            "step_ms": r["profile.step_ms"], "unprofiled_ms": r["profile.unprofiled_step_ms"],
            "overhead": r["profile.overhead"], "in_flight_ms": r["profile.communication_in_flight_ms"],
            "overlap": r.get("profile.overlap"), "top_ops": r["profile.top_ops"],
            "parts": {c: r[f"profile.breakdown_ms.{c}"] for c in CATEGORIES},
            "trace": f"runs/{r['run_id']}/profile/{r['profile.trace']}"}
    return out


def table(configs: pd.DataFrame, profiles: dict[RunKey, dict]) -> pd.DataFrame | None:
    """ms per step by category for each profiled configuration of `configs`."""
    body = []
    for r in records_of(configs):
        p = profiles.get(r["key"])
        if p is None:
            continue
        body.append([r["series"], str(r["world_size"]), fmt(p["step_ms"], ".1f"),
                     *[fmt(p["parts"][c], ".1f") for c in CATEGORIES], fmt(p["in_flight_ms"], ".1f"),
                     fmt(p["overlap"], ".0%"), fmt(p["unprofiled_ms"], ".1f"), f"{p['overhead']:+.0%}",
                     _ops(p, 3), p["trace"]])
    if not body:
        return None
    headers = ["variant", "devices", "profiled step ms", *[f"{c} ms" for c in CATEGORIES],
               "communication in flight ms", "of it hidden", "unprofiled step ms", "profiler's cost",
               "top ops (ms / step)", "trace"]
    return pd.DataFrame(body, columns=headers)


def why_faster(groups: list, profiles: dict[RunKey, dict]) -> list[str]:
    """A sentence per verdict pair whose two sides were both profiled: the winner against each one it beats."""
    sentences = []
    for group in groups:
        if group.winner is None or group.winner["key"] not in profiles:
            continue
        w = profiles[group.winner["key"]]
        for comparison in group.beaten:
            o = profiles.get(comparison.other["key"])
            if o is not None:
                sentences.append(_explain(group.title, group.winner["series"], w, comparison.other["series"], o))
    return sentences


def section(configs: pd.DataFrame, profiles: dict[RunKey, dict], groups: list) -> list[Block]:
    """The breakdown of each profiled configuration, and why the verdict's winners (`groups`:
    bench.analysis.verdict.groups) are faster."""
    blocks = table_section("Where the profiled step goes", 3, (
        "The framework's own profiler (torch.profiler, tf.profiler) over 2 windows after the warm-up, outside the "
        "timed windows; ms per step of the configuration's last profiled run. Each instant of the step goes to the "
        "category running then (compute first, then input, then communication): an all-reduce in flight while "
        "the backward pass computes is hidden and counts in backward; communication = exposed, with nothing else "
        "running; framework = inside the framework's calls with no operation running (dispatch, Python, "
        "the executor); idle = nothing recorded. The parts add up to the profiled step; the profiler's cost is "
        "that step against the unprofiled windows'. Open a trace in https://ui.perfetto.dev (torch) or "
        "TensorBoard's profile plugin (TensorFlow)."), table(configs, profiles))
    reasons = why_faster(groups, profiles) if blocks else []
    if reasons:
        blocks += [heading("Why the winner is faster here", 3), text(*[f"- {r}" for r in reasons])]
    return blocks


def unprofiled_scale(profile: dict) -> float:
    """Profiled milliseconds to the step without the profiler: its cost differs between frameworks (one record
    per operator), so profiled milliseconds would overstate the side with more, smaller operators."""
    return profile["unprofiled_ms"] / profile["step_ms"]


def _unprofiled(profile: dict) -> dict[str, float]:
    """The categories scaled to the step without the profiler."""
    return {c: ms * unprofiled_scale(profile) for c, ms in profile["parts"].items()}


def _explain(title: str, winner: str, w: dict, other: str, o: dict) -> str:
    head = (f"{title}: {winner}'s step takes {w['unprofiled_ms']:.1f} ms, {other}'s {o['unprofiled_ms']:.1f} ms "
            f"({o['unprofiled_ms'] / w['unprofiled_ms']:.2f}x; each profile scaled to its unprofiled step, the "
            f"profiler costing {w['overhead']:+.0%} and {o['overhead']:+.0%})")
    ours, theirs = _unprofiled(w), _unprofiled(o)
    differences = sorted(((theirs[c] - ours[c], c) for c in CATEGORIES), reverse=True)
    shown = [(d, c) for d, c in differences if abs(d) >= SHOWN_DIFFERENCE_MS]
    parts = [f"{c} {theirs[c]:.1f} vs {ours[c]:.1f} ms ({d:+.1f})" for d, c in shown]
    rest = sum(d for d, c in differences if abs(d) < SHOWN_DIFFERENCE_MS)
    body = (": " + ", ".join(parts) + (f"; the other categories {rest:+.1f} ms together" if len(shown) < len(CATEGORIES)
                                       else "")) if parts else ": no category differs by 0.5 ms or more"
    if o["unprofiled_ms"] <= w["unprofiled_ms"]:
        body += (" — in these profiled runs the order is reversed (the runs moved), so they do not explain the "
                 "ranking: profile again")
    return (f"{head}{body}. Heaviest operations per step: {winner} {_ops(w, 2)}; {other} {_ops(o, 2)}.")


def _ops(profile: dict, count: int) -> str:
    ops = profile["top_ops"] if isinstance(profile["top_ops"], list) else []
    return ", ".join(f"{name} {ms:.1f}" for name, ms, _ in ops[:count]) or "-"

