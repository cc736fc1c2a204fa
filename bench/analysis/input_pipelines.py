"""The same configurations by input pipeline: the arrays in memory, the same images as files through the
framework's file pipeline, and from object storage, each one's throughput against the in-memory input's and its
test accuracy."""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt
from bench.metrics.blocks import Block, table_section
from bench.results.frame import records_of
from bench.spec.task import INPUTS
from bench.status import Status

# The real inputs, cheapest first (a synthetic twin is no input pipeline): the order tables and the verdict list them.
INPUT_ORDER = {name: index for index, name in enumerate(n for n in INPUTS if n != "synthetic")}


def comparison(configs: pd.DataFrame) -> dict | None:
    """The same configurations by input pipeline (memory, files and S3 with their loader workers):
    {"modes": [mode, ...], "groups": [(series, devices, {mode: row})]}; None unless some run read files."""
    records = [r for r in records_of(configs)
               if r["status"] == Status.OK and not r["key"].independent and r["key"].input in INPUT_ORDER]
    if not any(r["key"].input != "memory" for r in records):
        return None
    modes = sorted({r["key"].input_mode: r["key"] for r in records}.items(),
                   key=lambda item: (INPUT_ORDER[item[1].input], item[1].loader_workers))
    groups: dict = {}
    for r in records:
        groups.setdefault(r["key"]._replace(input="memory", loader_workers=0), {})[r["key"].input_mode] = r
    return {"modes": [mode for mode, _ in modes],
            "groups": [(base.series, base.world_size, by_mode) for base, by_mode in groups.items()]}


def table(compared: dict) -> pd.DataFrame:
    """Throughput (x the in-memory input's) · test accuracy, a column per input pipeline."""
    body = []
    for series, devices, by_mode in compared["groups"]:
        memory, cells = by_mode.get("memory"), [series, str(devices)]
        for mode in compared["modes"]:
            r = by_mode.get(mode)
            ratio = f" ({r['throughput'] / memory['throughput']:.2f}x)" if r and memory and mode != "memory" else ""
            cells.append(f"{fmt(r['throughput'], ',.0f')}{ratio} · {fmt(r['test_accuracy'], '.2%')}" if r else "-")
        body.append(cells)
    return pd.DataFrame(body, columns=["variant", "devices", *compared["modes"]])


def section(compared: dict | None) -> list[Block]:
    return table_section("Input pipelines: memory, files, object storage", 3, (
        "Throughput (samples/s; x the in-memory input's) · test accuracy, per input pipeline: the "
        "cached arrays in memory; the same images as PNG files through the framework's file "
        "pipeline (torchvision ImageFolder + DataLoader workers, tf.data map threads: `N workers`, "
        "whose cores come out of the slot's); the same files from an S3-compatible server (s3, "
        "s3torchconnector / boto3). Same images, same order: the accuracies should agree."),
        table(compared) if compared else None)
