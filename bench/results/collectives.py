"""The collectives' latency and bandwidth: an α–β fit per collective and topology of the microbenchmarks
(`bench.studies.microbench`), what a projection of an approach's communication to other device counts reads.

A collective of `size` bytes on a ring takes t = α + size x bus_factor(n) / busbw: α the latency (start-up and
the per-hop handshakes at this world size), busbw the bandwidth each link carries (nccl-tests' bus bandwidth;
bus_factor 2(n-1)/n for an all-reduce, (n-1)/n for an all-gather or a reduce-scatter). Fitted by least squares
over the measured sizes, with each point's relative residual: where a size's time is far off the line (a
protocol switch, a cache), the fit says so.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.results import allreduce
from bench.results.jsonl import read_jsonl
from bench.spec.collectives import BUS_FACTOR

FILE = "collectives.jsonl"  # all-gather and reduce-scatter; the all-reduce stays in allreduce.jsonl


def load(out_dir: Path) -> list[dict]:
    """Every collective measured in the folder (an all-reduce row written before there were others is one)."""
    return ([{"collective": "all_reduce", **r} for r in allreduce.load(out_dir)]
            + read_jsonl(Path(out_dir) / FILE))


@dataclass(frozen=True)
class Fit:
    collective: str
    backend: str
    device_type: str
    nodes: int
    world_size: int
    alpha_s: float                  # latency
    busbw: float                    # bus bandwidth, bytes/s
    residuals: tuple[float, ...]    # (measured - fitted) / measured, per size ascending
    sizes: tuple[int, ...]

    def seconds(self, size_bytes: float) -> float:
        """The fitted time of one collective of `size_bytes` (all-gather: its output; reduce-scatter: its input)."""
        return self.alpha_s + size_bytes * BUS_FACTOR[self.collective](self.world_size) / self.busbw

    @property
    def worst_residual(self) -> float:
        return max(abs(r) for r in self.residuals)


def fit_one(points: list[tuple[int, float]], collective: str, world_size: int) -> tuple[float, float] | None:
    """(α seconds, busbw bytes/s) of t = α + size x bus_factor / busbw, least squares; α is never negative (a line
    through the origin where the free fit's intercept is). None where time does not grow with size (nothing but
    latency and noise measured: no bandwidth to give)."""
    sizes = np.array([s for s, _ in points], dtype=float)
    times = np.array([t for _, t in points], dtype=float)
    # Relative least squares (each point weighted by 1 / its time): a 4 KiB message's microseconds count as much
    # as a 64 MiB one's seconds, so the latency is fitted on the small sizes, the bandwidth on the large.
    weights = 1 / times
    design = np.stack([np.ones_like(sizes), sizes], axis=1) * weights[:, None]
    (alpha, slope), *_ = np.linalg.lstsq(design, times * weights, rcond=None)
    if alpha < 0:
        alpha = 0.0
        slope = float(np.sum(sizes * times * weights**2) / np.sum((sizes * weights) ** 2))
    if not slope > 0:
        return None
    return float(alpha), BUS_FACTOR[collective](world_size) / float(slope)


def fits(table: list[dict]) -> list[Fit]:
    """One fit per collective, backend, device type and topology, on the latest measurement of each size; a
    topology with fewer than three sizes, or whose time does not grow with size, is not fitted."""
    latest: dict[tuple, dict[int, float]] = {}
    for r in table:
        key = (r.get("collective", "all_reduce"), r["backend"], r["device_type"], r["nodes"], r["world_size"])
        latest.setdefault(key, {})[r["size_bytes"]] = r["seconds"]
    out = []
    for (collective, backend, device_type, nodes, world), by_size in latest.items():
        if len(by_size) < 3 or world < 2:
            continue
        points = sorted(by_size.items())
        fitted = fit_one(points, collective, world)
        if fitted is None:
            continue
        line = Fit(collective, backend, device_type, nodes, world, *fitted, (), tuple(s for s, _ in points))
        out.append(dataclasses.replace(line, residuals=tuple((t - line.seconds(s)) / t for s, t in points)))
    return sorted(out, key=lambda f: (f.device_type, f.nodes, f.world_size, list(BUS_FACTOR).index(f.collective)))
