"""The results table (console and report.md), its best cells, the run-to-run spread, Keras fit against the custom
loop and the footnotes.

Everything here reads the configurations frame (`aggregate.configurations`): one line per run key,
repeats folded. Tables are DataFrames of formatted cells, printed with pandas (`to_markdown`).
"""
from __future__ import annotations

import pandas as pd

from bench import metrics
from bench.analysis.repeats import Runs, ratio
from bench.metrics import fmt, present
from bench.metrics.blocks import Block, table_section
from bench.results.frame import records_of
from bench.results.key import RunKey
from bench.spec.variants import VARIANTS
from bench.status import Status


LABELS = ("variant", "devices", "batch", "status")  # then the metrics' columns (bench.metrics)


def headers(line: dict) -> list[str]:
    return [*LABELS, *(c.header for c in metrics.columns(line))]


def row_cells(r: dict) -> list[str]:
    topo = f"{r['world_size']}" + (f" ({r['nodes']}x{r['devices_per_node']})" if r["nodes"] > 1 else "")
    device = r["device_type"] + ("*" if _cpu_limits(r) else "")
    status = r["status"] if r["status"] != Status.SKIPPED else "n/a"
    batch = f"{r['global_batch']} ({r['per_device_batch']}/dev, {r['scaling']})"
    if present(r.get("function.name")):  # your own function's batch is its own: only its dtbench.step samples count
        batch = "the function's"
    if r["status"] != Status.OK:
        reason = (r["error"] if present(r["error"]) else "-").splitlines()[0][:70]
        if r["status"] == Status.DOES_NOT_FIT and present(asked := r.get("memory.refused_allocation_mb")):
            reason = f"an allocation of {asked:,.0f} MiB refused"
        return [r["series"], f"{topo} {device}", batch, status, reason] + ["-"] * (len(metrics.columns(r)) - 1)
    figures = [c.cell(r) if c.cell else fmt(c.value(r), c.fmt) for c in metrics.columns(r)]
    return [r["series"], f"{topo} {device}", batch, status, *figures]


def cells(configs: pd.DataFrame) -> pd.DataFrame:
    records = records_of(configs)
    return pd.DataFrame([row_cells(r) for r in records], columns=headers(records[0]) if records else list(LABELS))


def text_table(configs: pd.DataFrame) -> str:
    return cells(configs).to_markdown(index=False, tablefmt="simple", disable_numparse=True)


def best_cells(configs: pd.DataFrame) -> list[tuple[int, str]]:
    """(line, header) of the best figure per column (independent runs compete in none)."""
    records = records_of(configs)
    out = []
    for column in metrics.columns(records[0]) if records else []:
        if column.higher_is_better is None:
            continue
        scored = [(column.value(r), i) for i, r in enumerate(records)
                  if r["status"] == Status.OK and not r["independent"] and present(column.value(r))]
        if len(scored) > 1:
            best = (max if column.higher_is_better else min)(scored)[0]
            out += [(i, column.header) for value, i in scored if value == best]
    return out


def markdown_table(configs: pd.DataFrame) -> str:
    """The results table with the best figure per column in bold."""
    table = cells(configs)
    for i, header in best_cells(configs):
        table.loc[i, header] = f"**{table.loc[i, header]}**"
    return table.to_markdown(index=False, tablefmt="pipe", disable_numparse=True)


def spread_table(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> pd.DataFrame | None:
    """Per configuration that ran more than once: its run medians, their spread (max / min, coefficient of
    variation) and the within-run interval they are held to; None where every configuration ran once."""
    body = []
    for r in records_of(configs):
        runs = measured.get(r["key"])
        if runs is None or runs.count < 2:
            continue
        body.append([r["series"], str(r["world_size"]), str(runs.count), ", ".join(f"{m:,.0f}" for m in runs.medians),
                     fmt(runs.max_over_min, ".2f"), fmt(runs.cv, ".1%"), fmt(runs.window_halfwidth, ".1%"),
                     "no" if runs.disagree else "yes"])
    headers = ["variant", "devices", "runs", "run medians (samples/s)", "max / min", "CV",
               "window 95% CI (± of median)", "runs agree within windows"]
    return pd.DataFrame(body, columns=headers) if body else None


def spread_section(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> list[Block]:
    return table_section("Run-to-run spread", 3, (
        "Each configuration's run medians across its repeats: max / min and the coefficient of variation, "
        "against how tightly each run's windows pin its own median (the 95 % interval's half-width). Runs "
        "whose intervals do not overlap disagree: the machine moved between them, and the verdict does not "
        "rank that configuration on them."), spread_table(configs, measured))


def fit_table(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> pd.DataFrame | None:
    """Each Keras-fit configuration against its custom loop on the same devices, task and input: throughput
    of each, their ratio with its 95 % interval (a tie where it includes 1), and both test accuracies."""
    by_key = {r["key"]: r for r in records_of(configs)}
    body = []
    for key, r in by_key.items():
        loop = VARIANTS[key.variant].custom_loop if key.variant in VARIANTS else None
        other = by_key.get(key._replace(variant=loop)) if loop else None
        if other is None or key not in measured or other["key"] not in measured:
            continue
        x = ratio(measured[key], measured[other["key"]])
        verdict = "tie" if x.tie else ("fit faster" if x.value > 1 else "custom loop faster")
        body.append([r["series"], other["series"], str(r["world_size"]), f"{r['throughput']:,.0f}",
                     f"{other['throughput']:,.0f}", f"{x.value:.2f} [{x.low:.2f}, {x.high:.2f}]", verdict,
                     fmt(r["test_accuracy"], ".4f"), fmt(other["test_accuracy"], ".4f")])
    headers = ["fit", "custom loop", "devices", "fit samples/s", "loop samples/s", "fit / loop [95% CI]", "reading",
               "fit test acc.", "loop test acc."]
    return pd.DataFrame(body, columns=headers) if body else None


def fit_section(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> list[Block]:
    return table_section("Keras fit against the custom loop", 3, (
        "The same strategy, model, recipe, input order and exact evaluation, trained through `model.compile` + "
        "`model.fit` (what most TensorFlow users run) and through the custom loop (`strategy.run` in a "
        "`tf.function`): what fit costs or saves is their ratio. The interval is from the repeats (the "
        "windows when each ran once); where it includes 1 the two tie on this machine."), fit_table(configs, measured))


def _cpu_limits(r: dict) -> list[str]:
    return [n for n in r["notes"] if n.startswith("cpu: ")]


def footnotes(configs: pd.DataFrame) -> list[str]:
    records = records_of(configs)
    limits = dict.fromkeys(f"{r['variant']}: {n[5:]}" for r in records for n in _cpu_limits(r))
    notes = [f"`cpu*` {limit}; larger topologies show n/a." for limit in limits]
    if configs["oversubscribed"].fillna(False).astype(bool).any():
        notes.append("Some runs had more device slots than cores (`oversubscribed` in the row).")
    notes.append("Scaling efficiency = throughput(N) / (N x throughput(1)) of the same variant and task, "
                 "throughput(1) measured like with like: under weak scaling one device at the same per-device "
                 "batch, under strong scaling one device at the same global batch; eff. vs single uses the "
                 "framework's plain single-device loop (torch-single, tf-single) as throughput(1). CPU device "
                 "slot = 1 core unless --cores-per-slot says otherwise.")
    if configs["independent"].any():
        notes.append("(no sync): the same variant with gradient synchronisation switched off, each replica on "
                     "its own shard: the no-communication upper bound (no accuracy: the replicas diverge).")
    if any(r["key"].asynchronous for r in records):
        notes.append("(asynchronous): tf-ps's workers push updates to the parameter servers without waiting for "
                     "each other (no all-reduce; each update on one worker's batch, weights moving meanwhile): its "
                     "speed and accuracy are not those of synchronous data parallelism and do not rank with them.")
    return notes


SCALING_NOTES = {
    "weak": "Weak scaling: each device trains the same per-device batch and the global batch grows with the "
            "devices (the learning rate with it: linear scaling rule, with a warm-up); scaling efficiency is "
            "against one device at the same per-device batch.",
    "strong": "Strong scaling: the global batch is split over the devices; scaling efficiency is against one "
              "device at the same global batch.",
}
