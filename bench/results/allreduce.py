"""The all-reduce microbenchmark's table (`bench.studies.microbench` measures it), and the communication floor it implies.

The floor for a model is the time a ring all-reduce of its gradients needs at the measured bus
bandwidth: grad_bytes x 2(n-1)/n / busbw. A training step can hide communication behind the
backward pass, but it cannot all-reduce faster than this.
"""
from __future__ import annotations

from pathlib import Path

from bench.results.jsonl import read_jsonl

def load(out_dir: Path) -> list[dict]:
    return read_jsonl(out_dir / "allreduce.jsonl")


def busbw_at(table: list[dict], world_size: int, nodes: int, size_bytes: int) -> float | None:
    """Bus bandwidth (bytes/s) at a message size on this topology, from the all-reduce time
    interpolated linearly between the measured sizes around it (latency + size / bandwidth)."""
    points = sorted((r["size_bytes"], r["seconds"]) for r in table
                    if r["world_size"] == world_size and r["nodes"] == nodes)
    if not points:
        return None
    below = [p for p in points if p[0] <= size_bytes] or points[:1]
    above = [p for p in points if p[0] >= size_bytes] or points[-1:]
    (s1, t1), (s2, t2) = below[-1], above[0]
    seconds = t1 if s1 == s2 else t1 + (t2 - t1) * (size_bytes - s1) / (s2 - s1)
    return size_bytes / seconds * 2 * (world_size - 1) / world_size


def communication_floor_ms(grad_bytes: int, world_size: int, busbw: float | None) -> float | None:
    """grad_bytes x 2(n-1)/n / busbw, in milliseconds."""
    if not busbw or world_size < 2:
        return None
    return 1000 * grad_bytes * 2 * (world_size - 1) / world_size / busbw
