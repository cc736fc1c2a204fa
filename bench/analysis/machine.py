"""What this machine measured apart from training: its matmul peak (`bench peak`, the measured peak utilisation is
a fraction of), the all-reduce microbenchmark (the step breakdown's communication floor) and the α–β fit of every
collective measured (bench.results.collectives)."""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt
from bench.metrics.blocks import Block, heading, table_section


def peak_table(peaks: list[dict]) -> pd.DataFrame:
    """The latest measurement per device, slot size and precision."""
    latest = pd.DataFrame(peaks).groupby(["device_type", "device_name", "threads", "precision"], sort=False).last()
    latest = latest.reset_index()
    latest["GFLOP/s"] = [fmt(v / 1e9, ",.1f") for v in latest["flops_per_s"]]
    latest["matmul"] = [f"{n}x{n}" for n in latest["side"]]
    return latest[["device_type", "device_name", "threads", "precision", "GFLOP/s", "matmul"]]


def allreduce_table(table: list[dict]) -> pd.DataFrame:
    """busbw per topology (a line) and message size (a column): the latest measurement of each."""
    wide = pd.DataFrame(table).pivot_table(index=["backend", "device_type", "nodes", "devices_per_node"],
                                           columns="size_bytes", values="busbw_gbps", aggfunc="last")
    wide.columns = [f"{s / 2**20:g} MiB" if s >= 2**20 else f"{s // 1024} KiB" for s in wide.columns]
    wide = wide.map(lambda v: fmt(v, ".3f")).reset_index()
    topology = pd.DataFrame({
        "backend": wide["backend"] + " (" + wide["device_type"] + ")",
        "devices": [f"{n * d} ({n}x{d})" for n, d in zip(wide["nodes"], wide["devices_per_node"])]})
    sizes = wide.drop(columns=["backend", "device_type", "nodes", "devices_per_node"])
    return pd.concat([topology, sizes], axis=1)


def fit_table(fitted: list) -> pd.DataFrame:
    """Per collective and topology: latency, bus bandwidth and how far the measured sizes sit off the line."""
    return pd.DataFrame([[f.collective.replace("_", "-"), f"{f.backend} ({f.device_type})",
                          f"{f.world_size} ({f.nodes}x{f.world_size // f.nodes})", f"{f.alpha_s * 1e6:,.0f}",
                          f"{f.busbw / 1e9:.3f}", f"{100 * f.worst_residual:.0f} %", len(f.sizes)] for f in fitted],
                        columns=["collective", "backend", "devices", "α (µs)", "busbw (GB/s)",
                                 "largest residual", "sizes"])


def sections(peaks: list[dict], microbenchmark: list[dict], fitted: list = ()) -> list[Block]:
    """The folder's measured peaks (peak.jsonl), all-reduce microbenchmark (allreduce.jsonl) and the collectives'
    α–β fits, each where it has any."""
    blocks = [heading("Matmul peak (measured)", 2), Block("table", peak_table(peaks))] if peaks else []
    blocks += table_section("All-reduce microbenchmark (busbw, GB/s)", 2, "busbw = algbw x 2(n-1)/n.",
                            allreduce_table(microbenchmark) if microbenchmark else None)
    return blocks + table_section(
        "Collectives: latency and bandwidth (α–β fit)", 2,
        "Each collective's time against its size, fitted as t = α + size x bus factor / busbw (relative least "
        "squares over the sizes measured; bus factor 2(n-1)/n for an all-reduce, (n-1)/n for an all-gather or a "
        "reduce-scatter). The largest residual is the measured size furthest off the line, as a share of its "
        "time: what a projection of an approach's communication from this fit cannot be closer than.",
        fit_table(fitted) if fitted else None)
