"""Where a profiled step's time goes, in the same categories for every framework. Standard library only.

A framework's profiler (torch_impl/profile.py, tf_impl/profile.py) turns its trace into spans: (start,
end, category) in seconds, from every thread of the rank (the training thread, the collectives' and the
input pipeline's). `partition` then cuts the profiled windows' wall time into the categories: at each
instant the time goes to the highest-ranked category running then, so a collective in flight while the
backward pass computes is hidden (overlapped) and counts as compute; only communication that nothing else
runs beside is exposed. Time inside the framework's own calls with no operation running is `framework`
(dispatch, Python, the executor); time with nothing at all recorded is `idle`. The parts add up to the
profiled wall time by construction.
"""
from __future__ import annotations

from dataclasses import dataclass

PROFILE_DIR = "profile"
PROFILED_WINDOWS = 2  # after the warm-up, before the timed windows: they count in no throughput figure
COMPUTE = ("forward", "backward", "optimizer")
CATEGORIES = (*COMPUTE, "input", "communication", "framework", "idle")
RANKED = CATEGORIES[:-1]  # the order an instant is attributed in; idle is what is left


@dataclass(frozen=True)
class Span:
    start: float
    end: float
    category: str


def partition(spans: list[Span], start: float, end: float) -> dict[str, float]:
    """Seconds per category of [start, end] (every category present, idle included)."""
    edges = []
    for s in spans:
        lo, hi = max(s.start, start), min(s.end, end)
        if hi > lo:
            edges += [(lo, 1, s.category), (hi, -1, s.category)]
    edges.sort(key=lambda e: (e[0], e[1]))
    active = dict.fromkeys(RANKED, 0)
    seconds = dict.fromkeys(CATEGORIES, 0.0)
    last = start
    for at, change, category in edges:
        if at > last:
            running = next((c for c in RANKED if active[c] > 0), "idle")
            seconds[running] += at - last
            last = at
        active[category] += change
    seconds["idle"] += max(0.0, end - last)
    return seconds


def in_flight(spans: list[Span], category: str, start: float, end: float) -> float:
    """Seconds of [start, end] during which some span of `category` runs (overlapped or not)."""
    covered, reach = 0.0, start
    for s in sorted((s for s in spans if s.category == category), key=lambda s: s.start):
        lo, hi = max(s.start, reach), min(s.end, end)
        if hi > lo:
            covered += hi - lo
            reach = hi
    return covered


def summary(spans: list[Span], start: float, end: float, steps: int, top_ops: list[tuple[str, float, int]],
            trace: str) -> dict:
    """What the row keeps of a profile: ms per step by category, communication in flight and hidden,
    the top operations by self time (name, ms per step, calls per step) and the trace's file name."""
    seconds = partition(spans, start, end)
    flying = in_flight(spans, "communication", start, end)
    exposed = seconds["communication"]
    return {"steps": steps, "step_ms": 1e3 * (end - start) / steps,
            "breakdown_ms": {c: 1e3 * s / steps for c, s in seconds.items()},
            "communication_in_flight_ms": 1e3 * flying / steps,
            "overlap": (1 - exposed / flying) if flying > 0 else None,
            "top_ops": [[name, 1e3 * s / steps, calls / steps] for name, s, calls in top_ops], "trace": trace}
