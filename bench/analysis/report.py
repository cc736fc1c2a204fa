"""A results folder's report: report.md and report.html, the verdict first, then per task the results
table, the run-to-run spread, the scaling analysis and the plots.

The report is built once as a list of blocks (heading, text, table, ...) that both files render: the
markdown with pandas' `to_markdown`, the HTML page by `bench.analysis.html`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis import fast_path, headline, html, plots, profiles, repeats, verdict
from bench.results import aggregate, allreduce, peak
from bench.analysis.sections import (INPUT_COST_NOTE, allreduce_table, breakdown, breakdown_table, checkpoint_table,
                                     device0_lines, input_comparison, input_disagreements, input_table,
                                     memory_entries, memory_table, over_time_table, peak_table, STRAGGLER_BEHIND,
                                     straggler_lines, straggler_table, stragglers, utilisation_entries,
                                     utilisation_table, where_the_rest_goes)
from bench.analysis.tables import SCALING_NOTES, cells, footnotes, fit_table, markdown_table, spread_table
from bench.metrics import present
from bench.results import ResultStore
from bench.results.frame import frame
from bench.results.fast_path import load as load_audit


@dataclass(frozen=True)
class Block:
    """One piece of the report: heading (text, level), text (markdown inline), bullets and notes (lines),
    headline ((title, its lines) per group), verdict ((title, sentences) per group), table (a DataFrame of cells),
    results (the configurations whose
    results table it is), image (a PNG's path)."""
    kind: str
    content: object
    level: int = 0


def _heading(text: str, level: int) -> Block:
    return Block("heading", text, level)


def _text(*lines: str) -> Block:
    return Block("text", "\n".join(lines))


def write_report(directory: Path, settings: dict | None = None) -> Path:
    """report.md and report.html (beside it) from the folder's rows; results.csv exported. Returns report.md.
    `settings`: the metrics' options (bench.metrics.settings: a price per device-hour)."""
    store = ResultStore(directory)
    runs = frame(store.dicts())
    configs = aggregate.configurations(runs, peak.load(directory), settings)
    blocks = build(directory, store, runs, configs)
    (directory / "report.html").write_text(html.render(blocks, runs))
    store.export_csv()
    path = directory / "report.md"  # last: `make reference` takes its presence for a sweep that finished
    path.write_text(markdown(blocks))
    return path


def build(directory: Path, store: ResultStore, runs: pd.DataFrame, configs: pd.DataFrame) -> list[Block]:
    table = allreduce.load(directory)
    measured = repeats.measured_runs(runs)
    profiled = profiles.latest(runs)
    last = configs.iloc[-1] if len(configs) else {}
    env = _environment(store)
    audit = load_audit(directory)
    blocks = [_heading("dtbench report", 1)]
    paragraphs, notes = verdict.summary(configs, runs, fast_path.warnings(store.dicts(), audit))
    if paragraphs:
        blocks += [_heading("Verdict", 2), Block("headline", headline.headlines(configs, measured)),
                   Block("verdict", (paragraphs, notes))]
    blocks += [
        _text(f"{len(runs)} runs in `{store.jsonl.name}`"
              + (f", repeats folded into {len(configs)} rows (median of run medians [range over runs])"
                 if len(configs) < len(runs) else "") + "."),
        Block("bullets", [
            f"host: {last.get('host', '-') if len(configs) else '-'}; "
            f"commit: {last.get('git_sha', '-') if len(configs) else '-'}",
            f"CPU: {env.get('cpu_model', '-')} ({env.get('cores_available', '-')} cores available)",
            f"GPU: {env.get('gpu_model', 'none')}; driver {env.get('driver', '-')}; "
            f"CUDA {env.get('cuda') or '-'}; NCCL {env.get('nccl') or '-'}",
            f"python {env.get('python', '-')}; " + ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items()),
            *(f"kernels, {line}" for line in fast_path.kernel_lines(store.dicts()))])]
    for (task, precision, scaling), subset in configs.groupby(["task", "precision", "scaling"], sort=False):
        blocks += _task_section(directory, subset.reset_index(drop=True), table, measured, profiled,
                                f"{task}-{precision}-{scaling}", f"task {task}/{precision}, {scaling} scaling",
                                SCALING_NOTES[scaling])
    over_time = over_time_table(runs, directory)
    if over_time is not None:
        blocks += [_heading("What each run did over time", 2), _text(
            "Sampled every `--sample-every` seconds from launch to the end by the node agent (psutil; NVML on "
            "GPUs): each rank's resident memory with its loader processes, its CPU use, how busy the cores of "
            "its slot were (another process on them shows as busy the rank did not cause), the GPUs' "
            "utilisation and energy per training sample (their mean power after the first step over the "
            "throughput); ranges are across ranks. The sampler's own CPU is a fraction of one core. Each run's "
            "figure, ranks as lines, is in its run folder."), Block("table", over_time)]
    found = stragglers(configs)
    if found:
        blocks += [_heading("Stragglers", 2), _text(
            "A rank's own time a step is the part in which it waits for no other rank: its wait for the next "
            "batch and its forward pass (on GPUs, CUDA events around it). Window times cannot show a straggler: "
            "each step all-reduces and each window ends in a barrier, so they are equal on every rank. A "
            f"configuration whose slowest rank is more than {STRAGGLER_BEHIND:.0%} behind the median rank is "
            "named. Not measured where the forward all-gathers parameters (FSDP, ZeRO-3) or the step is one "
            "graph (TensorFlow)."), Block("table", straggler_table(found))]
        blocks += [_text(*straggler_lines(found))] if any(s["straggler"] for s in found) else []
    checkpoints = checkpoint_table(runs)
    if checkpoints is not None:
        blocks += [_heading("Checkpoints", 2), _text(
            "Saved after every epoch the approach's own way (DDP: rank 0 `torch.save` of the unwrapped state "
            "dicts; Accelerate: `save_state`; TensorFlow: `tf.train.Checkpoint` + `CheckpointManager`), every "
            "rank waiting until it is written: the save is the training stall. Load = reading the last one "
            "back before the final evaluation."), Block("table", checkpoints)]
    if audit:
        blocks += [_heading("Fast path on this machine", 2), _text(
            "Each switch that decides a framework's kernels, measured here on and off: the framework's plain "
            "single-device loop on this task with synthetic input, two runs a side (on, off, off, on), each run's "
            "median over its windows; the ratio's range is over the two pairs. Measured once per machine (CPU, its "
            "instruction sets, library versions) and reused. A switch counts as faster the other way only where "
            "both pairs say so by more than 5 %; the verdict then names it."), Block("table", fast_path.audit_table(audit))]
    peaks = peak.load(directory)
    if peaks:
        blocks += [_heading("Matmul peak (measured)", 2), Block("table", peak_table(peaks))]
    if table:
        blocks += [_heading("All-reduce microbenchmark (busbw, GB/s)", 2), _text("busbw = algbw x 2(n-1)/n."),
                   Block("table", allreduce_table(table))]
    if len(configs):
        blocks.append(Block("notes", footnotes(configs)))
    return blocks


def _task_section(directory: Path, subset: pd.DataFrame, table: list[dict], measured: dict, profiled: dict,
                  prefix: str, title: str, note: str) -> list[Block]:
    blocks = [_heading(title, 2), _text(note), Block("results", subset), _text("Best per column in **bold**.")]
    spread = spread_table(subset, measured)
    if spread is not None:
        blocks += [_heading("Run-to-run spread", 3), _text(
            "Each configuration's run medians across its repeats: max / min and the coefficient of variation, "
            "against how tightly each run's windows pin its own median (the 95 % interval's half-width). Runs "
            "whose intervals do not overlap disagree: the machine moved between them, and the verdict does not "
            "rank that configuration on them."), Block("table", spread)]
    fits = fit_table(subset, measured)
    if fits is not None:
        blocks += [_heading("Keras fit against the custom loop", 3), _text(
            "The same strategy, model, recipe, input order and exact evaluation, trained through `model.compile` + "
            "`model.fit` (what most TensorFlow users run) and through the custom loop (`strategy.run` in a "
            "`tf.function`): what fit costs or saves is their ratio. The interval is from the repeats (the "
            "windows when each ran once); where it includes 1 the two tie on this machine."),
            Block("table", fits)]
    entries = breakdown(subset, table, profiled)
    if entries:
        blocks += [_heading("Where the step time goes", 3), _text(
            "Compute-only = the same run with gradient synchronisation off; communication cost = "
            "1 - throughput / no-sync throughput (negative: the no-sync run was slower, i.e. run-to-run "
            "noise exceeded the cost; repeat the runs); exposed communication = the step less its no-sync "
            "twin's, or where there is no twin (TensorFlow) the profile's communication with nothing else "
            "running; in flight and hidden = the profile's all-reduce time and the part of it the compute "
            "covered (`--profile`; profile times scaled to the unprofiled step); all-reduce floor = gradient bytes x 2(n-1)/n / busbw from the "
            "microbenchmark below (torch backends)."), Block("table", breakdown_table(entries))]
    blocks += _profile_blocks(subset, measured, profiled)
    inputs = input_comparison(subset)
    if inputs is not None:
        blocks += [_heading("Input pipelines: memory, files, object storage", 3), _text(
            "Throughput (samples/s; x the in-memory input's) · test accuracy, per input pipeline: the "
            "cached arrays in memory; the same images as PNG files through the framework's file "
            "pipeline (torchvision ImageFolder + DataLoader workers, tf.data map threads: `N workers`, "
            "whose cores come out of the slot's); the same files from an S3-compatible server (s3, "
            "s3torchconnector / boto3). Same images, same order: the accuracies should agree."),
            Block("table", input_table(inputs))]
    held = memory_entries(subset)
    if held:
        blocks += [_heading("Memory per device", 3), _text(
            "Model state = the parameters, gradients and optimizer state resident on a rank, each storage "
            "counted once (an FSDP shard as the rank holds it; ZeRO's fp32 master copy of the rank's "
            "partition shown as + master and counted in the total; TensorFlow's gradients live only inside "
            "the step: -; tf-ps's state is on its parameter servers); x one device's = against the same variant on one device (sharding shows as "
            "< 1). Peak / device = the CUDA allocator's peak after warm-up, on a CPU the process's peak "
            "RSS (framework and data included); device 0 · others' largest (GPUs, several devices) = the first "
            "device's peak against the largest of the rest: DataParallel keeps the module and gathers the outputs on "
            "its device 0."), Block("table", memory_table(held))]
        blocks += [_text(line) for line in device0_lines(held)]
    used = utilisation_entries(subset, measured, profiled)
    if any(present(e["row"]["flops_per_sample"]) for e in used):
        blocks += [_heading("How close to the hardware", 3), _text(
            "FLOPs counted per training sample (forward + backward, multiply-add = 2; torch's "
            "FlopCounterMode, Keras layers counted alike); MFU against the device's data-sheet dense peak "
            "(known GPUs only); of measured peak against `python -m bench peak` on this machine, per device "
            "and at the precision the matmuls ran in."), Block("table", utilisation_table(used))]
        rest = where_the_rest_goes(used)
        if rest:
            blocks.append(_text(*rest))
        if any(e["real_over_synthetic"] is not None for e in used):
            blocks.append(_text(INPUT_COST_NOTE, *[f"- {line}" for line in input_disagreements(used)]))
    pngs = (plots.draw_verdict(verdict.groups(subset, measured), directory, prefix)
            + plots.draw_all(subset, directory, prefix) + plots.draw_inputs(inputs, directory, prefix)
            + plots.draw_memory(held, directory, prefix) + plots.draw_breakdown(entries, directory, prefix)
            + plots.draw_utilisation(used, directory, prefix))
    return blocks + [Block("image", png) for png in pngs]


def _profile_blocks(subset: pd.DataFrame, measured: dict, profiled: dict) -> list[Block]:
    """--profile's breakdown of each profiled configuration, and why the verdict's winners are faster."""
    cut = profiles.table(subset, profiled)
    if cut is None:
        return []
    blocks = [_heading("Where the profiled step goes", 3), _text(
        "The framework's own profiler (torch.profiler, tf.profiler) over 2 windows after the warm-up, outside the "
        "timed windows; ms per step of the configuration's last profiled run. Each instant of the step goes to the "
        "category running then (compute first, then input, then communication): an all-reduce in flight while "
        "the backward pass computes is hidden and counts in backward; communication = exposed, with nothing else "
        "running; framework = inside the framework's calls with no operation running (dispatch, Python, "
        "the executor); idle = nothing recorded. The parts add up to the profiled step; the profiler's cost is "
        "that step against the unprofiled windows'. Open a trace in https://ui.perfetto.dev (torch) or "
        "TensorBoard's profile plugin (TensorFlow)."), Block("table", cut)]
    reasons = profiles.why_faster(verdict.groups(subset, measured), profiled)
    if reasons:
        blocks += [_heading("Why the winner is faster here", 3), _text(*[f"- {r}" for r in reasons])]
    return blocks


def markdown(blocks: list[Block]) -> str:
    lines = []
    for block in blocks:
        if block.kind == "heading":
            lines += ["#" * block.level + " " + block.content, ""]
        elif block.kind == "text":
            lines += [block.content, ""]
        elif block.kind == "bullets":
            lines += [f"- {line}" for line in block.content] + [""]
        elif block.kind == "headline":
            for title, found in block.content:
                lines += [f"**{title}: {found[0]}**" + "".join(f"<br>\n{x}" for x in found[1:]), ""]
            lines += ["The full comparison:", ""]
        elif block.kind == "verdict":
            paragraphs, notes = block.content
            lines += [f"- **{title}**: {text}" for title, text in paragraphs] + ["", *notes, ""]
        elif block.kind == "notes":
            lines += [f"- {line}" for line in block.content]
        elif block.kind == "table":
            lines += [block.content.to_markdown(index=False, disable_numparse=True), ""]
        elif block.kind == "results":
            lines += [markdown_table(block.content), ""]
        elif block.kind == "image":
            lines += [f"![{block.content.stem}]({block.content.name})", ""]
    return "\n".join(lines) + "\n"


def _environment(store: ResultStore) -> dict:
    """The environment of the last row, as stored (nested)."""
    rows = store.dicts()
    return rows[-1].get("environment", {}) if rows else {}
