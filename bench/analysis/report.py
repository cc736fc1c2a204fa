"""Tables from a results folder: the console summary, report.md, and the scaling analysis.

Everything here reads the configurations frame (`aggregate.configurations`): one line per run key,
repeats folded. Tables are DataFrames of formatted cells, printed with pandas (`to_markdown`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from bench.analysis import aggregate, allreduce, peak, plots
from bench.results import ResultStore
from bench.results.frame import frame
from bench.results.key import ASYNCHRONOUS


def present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _fmt(value, spec: str = ".0f", none: str = "-") -> str:
    return format(value, spec) if present(value) else none


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[dict], object]
    fmt: str
    higher_is_better: bool | None = None  # None: no best to mark


def _throughput_cell(r: dict) -> str:
    runs = f" ({int(r['runs'])} runs)" if present(r.get("runs")) else ""  # folded repeats: the range over runs
    return f"{r['throughput']:,.0f} [{r['ci_low']:,.0f}, {r['ci_high']:,.0f}]{runs}"


FIGURES = (
    Column("throughput (samples/s) median [95% CI]", lambda r: r["throughput"], "throughput", True),
    Column("per device", lambda r: r["per_device_throughput"], ",.0f", True),
    Column("scaling eff.", lambda r: r["scaling_efficiency"], ".2f", True),
    Column("eff. vs single", lambda r: r["scaling_efficiency_vs_single"], ".2f", True),
    Column("step ms", lambda r: r["step_ms"], ".1f", False),
    Column("startup s", lambda r: r["startup_s"], ".1f", False),
    Column("test acc.", lambda r: r["test_accuracy"], ".4f", True),
    Column("eval n", lambda r: r["eval_samples"], ".0f"),
    Column("time to acc. s", lambda r: r["time_to_accuracy_s"], ".1f", False),
    Column("TFLOP/s", lambda r: r["achieved_tflops"], ".3g", True),
    Column("MFU", lambda r: r["mfu"], ".1%", True),
    Column("of meas. peak", lambda r: r["peak_fraction"], ".1%", True),
)
HEADERS = ("variant", "devices", "batch", "status") + tuple(c.header for c in FIGURES)
# Folded repeats show "(R runs)" and the range over the runs in place of the 95 % interval.


def _cells(r: dict) -> list[str]:
    topo = f"{r['world_size']}" + (f" ({r['nodes']}x{r['devices_per_node']})" if r["nodes"] > 1 else "")
    device = r["device_type"] + ("*" if _cpu_limits(r) else "")
    status = r["status"] if r["status"] != "skipped" else "n/a"
    batch = f"{r['global_batch']} ({r['per_device_batch']}/dev, {r['scaling']})"
    if r["status"] != "ok":
        reason = (r["error"] if present(r["error"]) else "-").splitlines()[0][:70]
        return [r["series"], f"{topo} {device}", batch, status, reason] + ["-"] * (len(FIGURES) - 1)
    figures = [_throughput_cell(r) if c.fmt == "throughput" else _fmt(c.value(r), c.fmt) for c in FIGURES]
    return [r["series"], f"{topo} {device}", batch, status, *figures]


def cells(configs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame([_cells(r) for r in configs.to_dict("records")], columns=list(HEADERS))


def text_table(configs: pd.DataFrame) -> str:
    return cells(configs).to_markdown(index=False, tablefmt="simple", disable_numparse=True)


def markdown_table(configs: pd.DataFrame) -> str:
    """The results table with the best figure per column in bold (independent runs compete in none)."""
    table = cells(configs)
    records = configs.to_dict("records")
    for column in FIGURES:
        if column.higher_is_better is None:
            continue
        scored = [(column.value(r), i) for i, r in enumerate(records)
                  if r["status"] == "ok" and not r["independent"] and present(column.value(r))]
        if len(scored) > 1:
            best = (max if column.higher_is_better else min)(scored)[0]
            for value, i in scored:
                if value == best:
                    table.loc[i, column.header] = f"**{table.loc[i, column.header]}**"
    return table.to_markdown(index=False, tablefmt="pipe", disable_numparse=True)


# ---------------------------------------------------------------- scaling analysis

def breakdown(configs: pd.DataFrame, table: list[dict]) -> list[dict]:
    """Per multi-device run: measured step, compute-only step (its no-sync twin), communication floor."""
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
                 if grad_bytes and r["framework"] in ("torch", "accelerate") else None)
        out.append({
            "row": r, "step_ms": r["step_ms"], "compute_ms": twin["step_ms"] if twin else None,
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


def breakdown_table(entries: list[dict]) -> str:
    headers = ("variant", "devices", "step ms", "compute-only ms (no sync)", "communication cost",
               "all-reduce floor ms", "busbw GB/s at grad size", "gradients MiB")
    body = [[e["row"]["variant"], str(e["row"]["world_size"]), _fmt(e["step_ms"], ".1f"), _fmt(e["compute_ms"], ".1f"),
             _cost_cell(e["comm_cost"]), _fmt(e["floor_ms"], ".2f"), _fmt(e["busbw_gbps"], ".3f"),
             _fmt(e["grad_mb"], ".2f")]
            for e in entries]
    return pd.DataFrame(body, columns=list(headers)).to_markdown(index=False, disable_numparse=True)


def peak_table(peaks: list[dict]) -> str:
    """The latest measurement per device, slot size and precision."""
    latest = pd.DataFrame(peaks).groupby(["device_type", "device_name", "threads", "precision"], sort=False).last()
    latest = latest.reset_index()
    latest["GFLOP/s"] = [_fmt(v / 1e9, ",.1f") for v in latest["flops_per_s"]]
    latest["matmul"] = [f"{n}x{n}" for n in latest["side"]]
    return latest[["device_type", "device_name", "threads", "precision", "GFLOP/s", "matmul"]].to_markdown(
        index=False, disable_numparse=True)


def allreduce_table(table: list[dict]) -> str:
    """busbw per topology (a line) and message size (a column): the latest measurement of each."""
    wide = pd.DataFrame(table).pivot_table(index=["backend", "device_type", "nodes", "devices_per_node"],
                                           columns="size_bytes", values="busbw_gbps", aggfunc="last")
    wide.columns = [f"{s / 2**20:g} MiB" if s >= 2**20 else f"{s // 1024} KiB" for s in wide.columns]
    wide = wide.map(lambda v: _fmt(v, ".3f")).reset_index()
    topology = pd.DataFrame({
        "backend": wide["backend"] + " (" + wide["device_type"] + ")",
        "devices": [f"{n * d} ({n}x{d})" for n, d in zip(wide["nodes"], wide["devices_per_node"])]})
    sizes = wide.drop(columns=["backend", "device_type", "nodes", "devices_per_node"])
    return pd.concat([topology, sizes], axis=1).to_markdown(index=False, disable_numparse=True)


def checkpoint_table(runs: pd.DataFrame) -> str | None:
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
    body = [[r.series, str(r.world_size), str(r.runs), _fmt(r.save, ".3f"), _fmt(r.load, ".3f"),
             _fmt(r.size / 2**20, ".2f"), _fmt(r.stall, ".2%"), str(r.resumed)] for r in folded.itertuples()]
    headers = ["variant", "devices", "runs", "save s (stall)", "load s", "MiB on disk", "save / epoch of training",
               "resumed runs"]
    return pd.DataFrame(body, columns=headers).to_markdown(index=False, disable_numparse=True)


def utilisation_entries(configs: pd.DataFrame) -> list[dict]:
    """Per measured configuration: how close to the peak, and where the rest goes (communication from
    its no-sync twin, input from its synthetic-input twin and the wait for batches, compile time)."""
    records = configs.to_dict("records")
    ok = {r["key"]: r for r in records if r["status"] == "ok"}
    out = []
    for r in records:
        key = r["key"]
        if r["status"] != "ok" or key.independent or key.input == "synthetic":
            continue  # the twins are read beside the row they explain
        no_sync = ok.get(key._replace(independent=True))
        synthetic = ok.get(key._replace(input="synthetic", loader_workers=0))
        out.append({"row": r, "comm_cost": 1 - r["throughput"] / no_sync["throughput"] if no_sync else None,
                    "real_over_synthetic": r["throughput"] / synthetic["throughput"] if synthetic else None})
    return out


INPUT_ORDER = {"memory": 0, "files": 1, "s3": 2}


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


def memory_table(entries: list[dict]) -> str:
    body = [[e["row"]["series"], str(e["row"]["world_size"]), _fmt(e["row"]["model_state_mb"], ".2f"),
             e["row"]["model_state_parts"] if present(e["row"]["model_state_parts"]) else "-",
             _fmt(e["of_one_device"], ".2f"), _fmt(e["row"]["device_peak_mb"], ",.0f"),
             _fmt(e["row"]["throughput"], ",.0f")] for e in entries]
    headers = ["variant", "devices", "model state / rank (MiB)", "params · grads · optimizer (rank 0)",
               "x one device's", "peak / device (MiB)", "throughput (samples/s)"]
    return pd.DataFrame(body, columns=headers).to_markdown(index=False, disable_numparse=True)


def input_table(comparison: dict) -> str:
    """Throughput (x the in-memory input's) · test accuracy, a column per input pipeline."""
    body = []
    for series, devices, by_mode in comparison["groups"]:
        memory, cells = by_mode.get("memory"), [series, str(devices)]
        for mode in comparison["modes"]:
            r = by_mode.get(mode)
            ratio = f" ({r['throughput'] / memory['throughput']:.2f}x)" if r and memory and mode != "memory" else ""
            cells.append(f"{_fmt(r['throughput'], ',.0f')}{ratio} · {_fmt(r['test_accuracy'], '.2%')}" if r else "-")
        body.append(cells)
    return pd.DataFrame(body, columns=["variant", "devices", *comparison["modes"]]).to_markdown(
        index=False, disable_numparse=True)


def utilisation_table(entries: list[dict]) -> str:
    headers = ("variant", "devices", "GFLOP / sample", "TFLOP/s", "MFU", "of measured peak", "matmuls in",
               "communication cost", "input wait (of step)", "real / synthetic input", "compile s")
    body = [[e["row"]["series"], str(e["row"]["world_size"]), _fmt(_giga(e["row"]["flops_per_sample"]), ".4g"),
             _fmt(e["row"]["achieved_tflops"], ".3g"), _fmt(e["row"]["mfu"], ".1%"), _fmt(e["row"]["peak_fraction"], ".1%"),
             e["row"]["matmul_precision"] if present(e["row"]["matmul_precision"]) else "-", _cost_cell(e["comm_cost"]),
             _fmt(e["row"]["input_wait_fraction"], ".1%"), _fmt(e["real_over_synthetic"], ".2f"),
             _fmt(e["row"]["compile_s"], ".1f")] for e in entries]
    return pd.DataFrame(body, columns=list(headers)).to_markdown(index=False, disable_numparse=True)


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


# ---------------------------------------------------------------- report.md

def _cpu_limits(r: dict) -> list[str]:
    return [n for n in r["notes"] if n.startswith("cpu: ")]


def footnotes(configs: pd.DataFrame) -> list[str]:
    records = configs.to_dict("records")
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
    if any(r["key"].variant in ASYNCHRONOUS for r in records):
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


def write_report(directory: Path) -> Path:
    store = ResultStore(directory)
    runs = frame(store.dicts())
    configs = aggregate.configurations(runs, peak.load(directory))
    table = allreduce.load(directory)
    last = configs.iloc[-1] if len(configs) else {}
    env = _environment(store)
    header = ["# dtbench report", "",
              f"{len(runs)} runs in `{store.jsonl.name}`"
              + (f", repeats folded into {len(configs)} rows (median of run medians [range over runs])"
                 if len(configs) < len(runs) else "") + ".", "",
              f"- host: {last.get('host', '-') if len(configs) else '-'}; "
              f"commit: {last.get('git_sha', '-') if len(configs) else '-'}",
              f"- CPU: {env.get('cpu_model', '-')} ({env.get('cores_available', '-')} cores available)",
              f"- GPU: {env.get('gpu_model', 'none')}; driver {env.get('driver', '-')}; "
              f"CUDA {env.get('cuda') or '-'}; NCCL {env.get('nccl') or '-'}",
              f"- python {env.get('python', '-')}; "
              + ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items()),
              ""]
    body = []
    for (task, precision, scaling), subset in configs.groupby(["task", "precision", "scaling"], sort=False):
        subset = subset.reset_index(drop=True)
        body += [f"## task {task}/{precision}, {scaling} scaling", "", SCALING_NOTES[scaling], "",
                 markdown_table(subset), "", "Best per column in **bold**.", ""]
        entries = breakdown(subset, table)
        if entries:
            body += ["### Where the step time goes", "",
                     "Compute-only = the same run with gradient synchronisation off; communication cost = "
                     "1 - throughput / no-sync throughput (negative: the no-sync run was slower, i.e. run-to-run "
                     "noise exceeded the cost; repeat the runs); all-reduce floor = gradient bytes x 2(n-1)/n / "
                     "busbw from the microbenchmark below (torch backends).", "", breakdown_table(entries), ""]
        inputs = input_comparison(subset)
        if inputs is not None:
            body += ["### Input pipelines: memory, files, object storage", "",
                     "Throughput (samples/s; x the in-memory input's) · test accuracy, per input pipeline: the "
                     "cached arrays in memory; the same images as PNG files through the framework's file "
                     "pipeline (torchvision ImageFolder + DataLoader workers, tf.data map threads: `N workers`, "
                     "whose cores come out of the slot's); the same files from an S3-compatible server (s3, "
                     "s3torchconnector / boto3). Same images, same order: the accuracies should agree.", "",
                     input_table(inputs), ""]
        held = memory_entries(subset)
        if held:
            body += ["### Memory per device", "",
                     "Model state = the parameters, gradients and optimizer state resident on a rank, each storage "
                     "counted once (an FSDP shard as the rank holds it; ZeRO's fp32 master copy of the rank's "
                     "partition shown as + master and counted in the total; TensorFlow's gradients live only inside "
                     "the step: -; tf-ps's state is on its parameter servers); x one device's = against the same variant on one device (sharding shows as "
                     "< 1). Peak / device = the CUDA allocator's peak after warm-up, on a CPU the process's peak "
                     "RSS (framework and data included).", "", memory_table(held), ""]
        used = utilisation_entries(subset)
        if any(present(e["row"]["flops_per_sample"]) for e in used):
            body += ["### How close to the hardware", "",
                     "FLOPs counted per training sample (forward + backward, multiply-add = 2; torch's "
                     "FlopCounterMode, Keras layers counted alike); MFU against the device's data-sheet dense peak "
                     "(known GPUs only); of measured peak against `python -m bench peak` on this machine, per device "
                     "and at the precision the matmuls ran in.", "", utilisation_table(used), "",
                     *where_the_rest_goes(used), ""]
        prefix = f"{task}-{precision}-{scaling}"
        for png in (plots.draw_all(subset, directory, prefix) + plots.draw_inputs(inputs, directory, prefix)
                    + plots.draw_memory(held, directory, prefix)
                    + plots.draw_breakdown(entries, directory, prefix)
                    + plots.draw_utilisation(used, directory, prefix)):
            body += [f"![{png.stem}]({png.name})", ""]
    checkpoints = checkpoint_table(runs)
    if checkpoints:
        body += ["## Checkpoints", "",
                 "Saved after every epoch the approach's own way (DDP: rank 0 `torch.save` of the unwrapped state "
                 "dicts; Accelerate: `save_state`; TensorFlow: `tf.train.Checkpoint` + `CheckpointManager`), every "
                 "rank waiting until it is written: the save is the training stall. Load = reading the last one "
                 "back before the final evaluation.", "", checkpoints, ""]
    peaks = peak.load(directory)
    if peaks:
        body += ["## Matmul peak (measured)", "", peak_table(peaks), ""]
    if table:
        body += ["## All-reduce microbenchmark (busbw, GB/s)", "", "busbw = algbw x 2(n-1)/n.", "",
                 allreduce_table(table), ""]
    body += [f"- {n}" for n in footnotes(configs)] if len(configs) else []
    path = directory / "report.md"
    path.write_text("\n".join(header + body) + "\n")
    store.export_csv()
    return path


def _environment(store: ResultStore) -> dict:
    """The environment of the last row, as stored (nested)."""
    rows = store.dicts()
    return rows[-1].get("environment", {}) if rows else {}
