"""The scaling analysis under each results table: where the step time goes, input pipelines, memory per
device, how close to the hardware, checkpoints, the measured peak and the all-reduce microbenchmark.
Each `*_table` is a DataFrame of formatted cells (report.md prints it with `to_markdown`, report.html with
`to_html`).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.analysis.profiles import unprofiled_scale
from bench.analysis.repeats import ratio
from bench.results import allreduce
from bench.spec.task import INPUTS
from bench.spec.variants import PROBED_COLLECTIVES
from bench.analysis.tables import fmt
from bench.metrics import present

def breakdown(configs: pd.DataFrame, table: list[dict], profiles: dict | None = None) -> list[dict]:
    """Per multi-device run: measured step, compute-only step (its no-sync twin), communication floor, and
    the communication exposed: the step less its no-sync twin's, else (TensorFlow has no twin) the profile's
    exposed communication (bench.analysis.profiles), with how much of it the profile saw hidden."""
    records = configs.to_dict("records")
    no_sync = {r["key"]: r for r in records if r["independent"] and r["status"] == "ok"}
    out = []
    for r in records:
        if r["status"] != "ok" or r["independent"] or r["world_size"] < 2 or not present(r["step_ms"]):
            continue
        twin = no_sync.get(r["key"]._replace(independent=True))
        params = r["params"] if present(r["params"]) else None
        grad_bytes = int(params) * 4 if params else None  # gradients are fp32 (autocast keeps fp32 weights)
        busbw = (allreduce.busbw_at(table, r["world_size"], r["nodes"], grad_bytes)
                 if grad_bytes and r["framework"] in PROBED_COLLECTIVES else None)
        profile = (profiles or {}).get(r["key"])
        unprofiled = unprofiled_scale(profile) if profile else None
        exposed = (r["step_ms"] - twin["step_ms"], "no-sync twin") if twin else \
            (profile["parts"]["communication"] * unprofiled, "profile") if profile else (None, None)
        out.append({
            "row": r, "step_ms": r["step_ms"], "compute_ms": twin["step_ms"] if twin else None,
            "exposed_ms": exposed[0], "exposed_from": exposed[1],
            "in_flight_ms": profile["in_flight_ms"] * unprofiled if profile else None,
            "overlap": profile["overlap"] if profile else None,
            "comm_cost": 1 - r["throughput"] / twin["throughput"] if twin else None,
            "floor_ms": allreduce.communication_floor_ms(grad_bytes, r["world_size"], busbw) if grad_bytes else None,
            "busbw_gbps": busbw / 1e9 if busbw else None, "grad_mb": grad_bytes / 2**20 if grad_bytes else None,
        })
    return out


def _cost_cell(cost: float | None) -> str:
    if cost is None:
        return "-"
    # A no-sync run slower than its synced twin: run-to-run noise exceeds the communication cost.
    return f"{100 * cost:.0f}%" + (" (noise)" if cost < 0 else "")


def breakdown_table(entries: list[dict]) -> pd.DataFrame:
    headers = ("variant", "devices", "step ms", "compute-only ms (no sync)", "communication cost",
               "exposed communication ms", "in flight ms (profile)", "hidden (profile)",
               "all-reduce floor ms", "busbw GB/s at grad size", "gradients MiB")
    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(e["step_ms"], ".1f"), fmt(e["compute_ms"], ".1f"),
             _cost_cell(e["comm_cost"]),
             f"{fmt(e['exposed_ms'], '.1f')} ({e['exposed_from']})" if e["exposed_from"] else "-",
             fmt(e["in_flight_ms"], ".1f"), fmt(e["overlap"], ".0%"), fmt(e["floor_ms"], ".2f"),
             fmt(e["busbw_gbps"], ".3f"), fmt(e["grad_mb"], ".2f")]
            for e in entries]
    return pd.DataFrame(body, columns=list(headers))


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


def checkpoint_table(runs: pd.DataFrame) -> pd.DataFrame | None:
    """Per configuration that saved checkpoints: the training stall of one save, loading it back, the bytes
    on disk (medians over its runs), and the stall against an epoch's training time."""
    if "checkpoint_save_s" not in runs:
        return None
    saved = runs[(runs["status"] == "ok") & runs["checkpoint_save_s"].notna()].copy()
    if saved.empty:
        return None
    saved["series"] = [key.series for key in saved["key"]]
    saved["stall"] = saved["checkpoint_save_s"] / (saved["train_s"] / saved["epochs"])
    folded = saved.groupby(["series", "world_size"], sort=False).agg(
        runs=("run_id", "size"), save=("checkpoint_save_s", "median"), load=("checkpoint_load_s", "median"),
        size=("checkpoint_bytes", "median"), stall=("stall", "median"),
        resumed=("resumed_from", lambda r: int(r.notna().sum()))).reset_index()
    body = [[r.series, str(r.world_size), str(r.runs), fmt(r.save, ".3f"), fmt(r.load, ".3f"),
             fmt(r.size / 2**20, ".2f"), fmt(r.stall, ".2%"), str(r.resumed)] for r in folded.itertuples()]
    headers = ["variant", "devices", "runs", "save s (stall)", "load s", "MiB on disk", "save / epoch of training",
               "resumed runs"]
    return pd.DataFrame(body, columns=headers)


def over_time_table(runs: pd.DataFrame, directory: Path) -> pd.DataFrame | None:
    """Per run that was sampled (bench.run.sampler): its ranks' peak resident memory and mean CPU use, how
    busy their slots were, on GPUs their utilisation and energy per sample, and where its plot is."""
    if "timeseries.ranks" not in runs:
        return None
    sampled = runs[runs["timeseries.ranks"].notna()]
    if sampled.empty:
        return None

    def span(values) -> str:
        values = [v for v in (values if isinstance(values, list) else []) if v == v]
        if not values:
            return "-"
        low, high = fmt(min(values), ",.0f"), fmt(max(values), ",.0f")
        return low if low == high else f"{low}–{high}"  # ranks that differ below the shown digit: one figure

    body = []
    for r in sampled.to_dict("records"):
        plot = Path("runs") / r["run_id"] / "timeseries.png"
        body.append([r["key"].label, r["status"], span(r.get("timeseries.peak_rss_mb")),
                     span(r.get("timeseries.mean_cpu_pct")), span(r.get("timeseries.mean_slot_busy_pct")),
                     span(r.get("timeseries.gpu_mean_util_pct")),
                     fmt(r.get("timeseries.energy_j_per_sample"), ".4f"),
                     fmt(r.get("timeseries.sampler_cpu_fraction"), ".2%"),
                     str(plot) if (directory / plot).exists() else "(run folder not here)"])
    headers = ["run", "status", "peak RSS / rank (MiB)", "CPU / rank (% of a core)", "slot busy (%)",
               "GPU util (%)", "J / sample", "sampler CPU", "plot"]
    return pd.DataFrame(body, columns=headers)


STRAGGLER_BEHIND = 0.10  # a rank this far behind the median rank's own time is named as a straggler


def stragglers(configs: pd.DataFrame) -> list[dict]:
    """Per configuration whose ranks timed their own work (bench.run.fold.rank_times): each rank's own time a
    step, the slowest rank, how far it is behind the median rank, and whether that makes it a straggler."""
    if "rank_times.behind_median" not in configs:
        return []
    out = []
    for r in configs.to_dict("records"):
        behind = r.get("rank_times.behind_median")
        if not present(behind):
            continue
        own = {int(c.rsplit(".", 1)[1]): v for c, v in r.items() if c.startswith("rank_times.own_ms.") and present(v)}
        out.append({"label": r["key"].label, "own_ms": dict(sorted(own.items())),
                    "slowest": int(r["rank_times.slowest_rank"]), "behind": behind,
                    "straggler": behind > STRAGGLER_BEHIND})
    return out


def straggler_table(found: list[dict]) -> pd.DataFrame:
    def own(ms: dict[int, float]) -> str:
        shown = ", ".join(f"{rank}: {value:.2f}" for rank, value in list(ms.items())[:8])
        return shown + (f" … ({len(ms)} ranks)" if len(ms) > 8 else "")

    body = [[s["label"], own(s["own_ms"]), s["slowest"], f"{s['behind']:+.0%}",
             "yes: a straggler" if s["straggler"] else "no"] for s in found]
    return pd.DataFrame(body, columns=["configuration", "own ms / step by rank", "slowest rank", "behind median",
                                       f"more than {STRAGGLER_BEHIND:.0%} behind"])


def straggler_lines(found: list[dict]) -> list[str]:
    """One sentence per straggler, naming it."""
    return [f"{s['label']}: rank {s['slowest']} is a straggler, {s['behind']:.0%} behind the median rank "
            f"({s['own_ms'][s['slowest']]:.2f} ms of its own a step against the median rank's "
            f"{s['own_ms'][s['slowest']] / (1 + s['behind']):.2f}): it holds every other rank back at each "
            "all-reduce." for s in found if s["straggler"]]


def utilisation_entries(configs: pd.DataFrame, measured: dict | None = None, profiles: dict | None = None) -> list[dict]:
    """Per measured configuration: how close to the peak, and where the rest goes (communication from
    its no-sync twin; the input's cost three ways: the synthetic-input twin's gap with its 95 % interval,
    the host's wait for batches, the profile's input time; compile time)."""
    records = configs.to_dict("records")
    ok = {r["key"]: r for r in records if r["status"] == "ok"}
    measured, profiles = measured or {}, profiles or {}
    out = []
    for r in records:
        key = r["key"]
        if r["status"] != "ok" or key.independent or key.input == "synthetic":
            continue  # the twins are read beside the row they explain
        no_sync = ok.get(key._replace(independent=True))
        synthetic = ok.get(key._replace(input="synthetic", loader_workers=0))
        between = (ratio(measured[key], measured[synthetic["key"]])
                   if synthetic and key in measured and synthetic["key"] in measured else None)
        profile = profiles.get(key)
        out.append({"row": r, "comm_cost": 1 - r["throughput"] / no_sync["throughput"] if no_sync else None,
                    "real_over_synthetic": r["throughput"] / synthetic["throughput"] if synthetic else None,
                    "real_over_synthetic_ci": (between.low, between.high) if between else None,
                    "profile_input": profile["parts"]["input"] / profile["step_ms"] if profile else None})
    return out


# The real inputs, cheapest first (a synthetic twin is no input pipeline): the order tables and the verdict list them.
INPUT_ORDER = {name: index for index, name in enumerate(n for n in INPUTS if n != "synthetic")}


def input_comparison(configs: pd.DataFrame) -> dict | None:
    """The same configurations by input pipeline (memory, files and S3 with their loader workers):
    {"modes": [mode, ...], "groups": [(series, devices, {mode: row})]}; None unless some run read files."""
    records = [r for r in configs.to_dict("records")
               if r["status"] == "ok" and not r["key"].independent and r["key"].input in INPUT_ORDER]
    if not any(r["key"].input != "memory" for r in records):
        return None
    modes = sorted({r["key"].input_mode: r["key"] for r in records}.items(),
                   key=lambda item: (INPUT_ORDER[item[1].input], item[1].loader_workers))
    groups: dict = {}
    for r in records:
        groups.setdefault(r["key"]._replace(input="memory", loader_workers=0), {})[r["key"].input_mode] = r
    return {"modes": [mode for mode, _ in modes],
            "groups": [(base.series, base.world_size, by_mode) for base, by_mode in groups.items()]}


def memory_entries(configs: pd.DataFrame) -> list[dict]:
    """Configurations that counted their model state: per rank, against the same variant on one device."""
    records = [r for r in configs.to_dict("records") if r["status"] == "ok" and present(r["model_state_mb"])
               and not r["key"].independent and r["key"].input in ("memory", "synthetic")]
    by_key = {r["key"]: r for r in records}
    return [{"row": r, "of_one_device": r["model_state_mb"] / one["model_state_mb"]
             if (one := by_key.get(r["key"].one_device())) and one["model_state_mb"] else None} for r in records]


def memory_table(entries: list[dict]) -> pd.DataFrame:
    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(e["row"]["model_state_mb"], ".2f"),
             e["row"]["model_state_parts"] if present(e["row"]["model_state_parts"]) else "-",
             fmt(e["of_one_device"], ".2f"), fmt(e["row"]["device_peak_mb"], ",.0f"),
             fmt(e["row"]["throughput"], ",.0f")] for e in entries]
    headers = ["variant", "devices", "model state / rank (MiB)", "params · grads · optimizer (rank 0)",
               "x one device's", "peak / device (MiB)", "throughput (samples/s)"]
    table = pd.DataFrame(body, columns=headers)
    if any(present(e["row"]["device0_peak_mb"]) for e in entries):
        table.insert(6, "device 0 · others' largest (MiB)", [_device0_cell(e["row"]) for e in entries])
    return table


def _device0_cell(row: dict) -> str:
    if not present(row["device0_peak_mb"]):
        return "-"
    first, rest = row["device0_peak_mb"], row["other_devices_peak_mb"]
    ahead = round(first / rest - 1, 2) if rest else None
    return f"{first:,.0f} · {rest:,.0f}" + ("" if ahead is None else f" ({ahead:+.0%})" if ahead else " (±0%)")


DEVICE0_AHEAD = 0.10  # device 0's peak this far above every other device's is named under the table


def device0_lines(entries: list[dict]) -> list[str]:
    """The configurations whose device 0 peaked well above the others: DataParallel's, which keeps the
    module and gathers the outputs and the loss there, so its device 0 bounds the batch it can hold."""
    return [f"{r['series']} on {r['world_size']} devices: device 0 peaked at {r['device0_peak_mb']:,.0f} MiB, "
            f"the others at most {r['other_devices_peak_mb']:,.0f} ({r['device0_peak_mb'] / r['other_devices_peak_mb'] - 1:+.0%}); "
            "the batch it can hold is bounded by device 0."
            for r in (e["row"] for e in entries)
            if present(r["device0_peak_mb"]) and present(r["other_devices_peak_mb"]) and r["other_devices_peak_mb"] > 0
            and r["device0_peak_mb"] > (1 + DEVICE0_AHEAD) * r["other_devices_peak_mb"]]


def input_table(comparison: dict) -> pd.DataFrame:
    """Throughput (x the in-memory input's) · test accuracy, a column per input pipeline."""
    body = []
    for series, devices, by_mode in comparison["groups"]:
        memory, cells = by_mode.get("memory"), [series, str(devices)]
        for mode in comparison["modes"]:
            r = by_mode.get(mode)
            ratio = f" ({r['throughput'] / memory['throughput']:.2f}x)" if r and memory and mode != "memory" else ""
            cells.append(f"{fmt(r['throughput'], ',.0f')}{ratio} · {fmt(r['test_accuracy'], '.2%')}" if r else "-")
        body.append(cells)
    return pd.DataFrame(body, columns=["variant", "devices", *comparison["modes"]])


def utilisation_table(entries: list[dict]) -> pd.DataFrame:
    headers = ("variant", "devices", "GFLOP / sample", "TFLOP/s", "MFU", "of measured peak", "matmuls in",
               "communication cost", "real / synthetic input [95% CI]", "input wait (of step)",
               "input in profile (of step)", "compile s")
    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(_giga(e["row"]["flops_per_sample"]), ".4g"),
             fmt(e["row"]["achieved_tflops"], ".3g"), fmt(e["row"]["mfu"], ".1%"), fmt(e["row"]["peak_fraction"], ".1%"),
             e["row"]["matmul_precision"] if present(e["row"]["matmul_precision"]) else "-", _cost_cell(e["comm_cost"]),
             _twin_cell(e), fmt(e["row"]["input_wait_fraction"], ".1%"), fmt(e["profile_input"], ".1%"),
             fmt(e["row"]["compile_s"], ".1f")] for e in entries]
    return pd.DataFrame(body, columns=list(headers))


def _twin_cell(e: dict) -> str:
    if e["real_over_synthetic"] is None:
        return "-"
    ci = e["real_over_synthetic_ci"]
    return f"{e['real_over_synthetic']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


INPUT_COST_NOTE = (
    "The input's cost is measured three ways. Read the synthetic twin's: the same run with one batch made on the "
    "device, so 1 - real / synthetic is everything the input pipeline costs the step (reading and collating the "
    "batch, copying and normalising it, the memory a fresh batch touches), with its interval from the runs. "
    "The input wait (PyTorch only: TensorFlow fetches inside its compiled step) times just the loop blocking on "
    "the next batch, and the profile's input just the input work that nothing else runs beside; both leave out "
    "what a fresh batch costs the step's own operators, so they can sit below the twin's gap.")


def input_disagreements(entries: list[dict]) -> list[str]:
    """Rows whose input wait falls outside what their synthetic twin says the input costs, with the reason."""
    out = []
    for e in entries:
        wait, ci = e["row"]["input_wait_fraction"], e["real_over_synthetic_ci"]
        if not present(wait) or ci is None:
            continue
        low, high = 1 - ci[1], 1 - ci[0]  # the cost's interval from the ratio's
        if not low <= wait <= high:
            out.append(f"{e['row']['series']} on {e['row']['world_size']} device(s): its synthetic twin puts the "
                       f"input's cost at {1 - e['real_over_synthetic']:.0%} [{low:.0%}, {high:.0%}], its input wait "
                       f"at {wait:.1%}: " + ("the wait leaves out what a fresh batch costs the step itself (its copy, "
                                             "normalisation and memory); read the twin's gap" if wait < low else
                                             "the twin's runs drifted from this configuration's; repeat both"))
    return out


def where_the_rest_goes(entries: list[dict]) -> list[str]:
    """One sentence per series, at its largest device count."""
    largest = {}
    for e in entries:
        if present(e["row"]["peak_fraction"]):
            largest[e["row"]["series"]] = e  # entries come by ascending device count per series
    sentences = []
    for series, e in largest.items():
        r, parts = e["row"], []
        if e["comm_cost"] is not None:
            parts.append(f"gradient synchronisation costs {e['comm_cost']:.0%} of its throughput (against its no-sync twin)")
        if present(r["input_wait_fraction"]):
            parts.append(f"waiting for input takes {r['input_wait_fraction']:.1%} of its step time")
        if e["real_over_synthetic"] is not None:
            parts.append(f"with the input pipeline left out it runs {1 / e['real_over_synthetic']:.2f}x as fast")
        rest = "; ".join(parts) + "; " if parts else ""
        sentences.append(f"{series} on {r['world_size']} device(s) reaches {r['peak_fraction']:.1%} of the measured "
                         f"{r['matmul_precision']} matmul peak per device: {rest}the rest is the compute itself "
                         "running below the matmul peak (small convolutions, memory-bound layers, framework overhead).")
    return sentences


def _giga(flops) -> float | None:
    return flops / 1e9 if present(flops) else None
