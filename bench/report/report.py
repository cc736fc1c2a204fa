"""A results folder's report: report.md and report.html, the verdict first, then per task the results table,
the analyses that read several metrics, each metric's own section (bench.metrics) and the plots, then the
folder's sections: over time, checkpoints, the fast path, the measured peak and all-reduce, and the projection
to more devices (labelled projected, after everything measured).

The report is built once as a list of blocks (heading, text, table, ...) that both files render: the
markdown with pandas' `to_markdown`, the HTML page by `bench.report.html`.
"""
from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from bench import metrics
from bench.analysis import fast_path, headline, input_pipelines, machine, model_pairs, repeats, tuned, verdict
from bench.projection import project
from bench.report import checkpoints, html, memory_budget, model_size, over_time, plots, profiles, step_breakdown
from bench.report.tables import SCALING_NOTES, fit_section, footnotes, markdown_table, spread_section
from bench.spec.task import preset_model
from bench.metrics import memory, utilisation
from bench.metrics.blocks import Block, heading, text
from bench.analysis.folder import Folder
from bench.results import ResultStore, allreduce, collectives
from bench.results.jsonl import RESULTS


def write_report(folder: Folder) -> Path:
    """report.md and report.html (beside it) from the folder as read, and its rows' tables exported (results.csv
    and results.parquet). Returns report.md."""
    directory = folder.directory
    blocks = build(folder)
    (directory / "report.html").write_text(html.render(blocks, folder.runs))
    ResultStore(directory).export_tables(folder.runs)
    path = directory / "report.md"  # last: `make reference` takes its presence for a sweep that finished
    path.write_text(markdown(blocks))
    return path


def build(folder: Folder) -> list[Block]:
    directory, runs, configs = folder.directory, folder.runs, folder.configs
    microbenchmark = allreduce.load(directory)
    measured = repeats.measured_runs(runs)
    profiled = profiles.latest(runs)
    last = configs.iloc[-1] if len(configs) else {}
    env = folder.environment
    blocks = [heading("dtbench report", 1)]
    paragraphs, notes = verdict.summary(configs, runs, folder.warnings)
    if paragraphs:
        blocks += [heading("Verdict", 2), Block("headline", headline.headlines(configs, measured)),
                   Block("verdict", (paragraphs, notes))]
    blocks += [
        text(f"{len(runs)} runs in `{RESULTS}`"
             + (f", repeats folded into {len(configs)} rows (median of run medians [range over runs])"
                if len(configs) < len(runs) else "") + "."),
        Block("bullets", [
            f"host: {last.get('host', '-') if len(configs) else '-'}; "
            f"commit: {last.get('git_sha', '-') if len(configs) else '-'}"
            + (f"; dtbench {env['dtbench']}" if env.get("dtbench") else ""),
            f"CPU: {env.get('cpu_model', '-')} ({env.get('cores_available', '-')} cores available)",
            f"GPU: {env.get('gpu_model', 'none')}; driver {env.get('driver', '-')}; "
            f"CUDA {env.get('cuda') or '-'}; NCCL {env.get('nccl') or '-'}",
            f"python {env.get('python', '-')}; " + ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items()),
            *(f"kernels, {line}" for line in fast_path.kernel_lines(folder.rows))])]
    for (task, precision, scaling), subset in configs.groupby(["task", "precision", "scaling"], sort=False):
        blocks += _task_section(directory, subset.reset_index(drop=True), microbenchmark, measured, profiled,
                                f"{task}-{precision}-{scaling}",
                                f"task {task}" + (f" ({preset_model(task)})" if preset_model(task) else "")
                                + f"/{precision}, {scaling} scaling",
                                SCALING_NOTES[scaling])
    blocks += (model_pairs.section(configs) + over_time.section(runs, directory) + checkpoints.section(runs)
               + fast_path.section(folder.audit)
               + machine.sections(folder.peaks, microbenchmark, collectives.fits(collectives.load(directory))))
    blocks += tuned.search_section(directory, configs)  # a tuning whose defaults all won: what it raced
    if len(configs):
        blocks.append(Block("notes", footnotes(configs)))
    return blocks + project.section(folder)  # after every measured figure and its notes


def _task_section(directory: Path, subset: pd.DataFrame, microbenchmark: list[dict], measured: dict,
                  profiled: dict, prefix: str, title: str, note: str) -> list[Block]:
    """The results table, the analyses that read several metrics, then each metric's own section (bench.metrics),
    then the figures."""
    groups = verdict.groups(subset, measured)
    steps = step_breakdown.entries(subset, microbenchmark, profiled)
    inputs = input_pipelines.comparison(subset)

    @cache  # a metric's section and its figure both ask (the interval is a bootstrap where a side ran once)
    def ratio(key, other) -> repeats.Ratio | None:
        return repeats.ratio(measured[key], measured[other]) if key in measured and other in measured else None

    part = metrics.Part(subset, profiled, ratio)
    at_best = tuned.entries(groups, subset, measured)
    blocks = [heading(title, 2), text(note), Block("results", subset), text("Best per column in **bold**."),
              *tuned.section(at_best), *spread_section(subset, measured), *fit_section(subset, measured),
              *step_breakdown.section(steps),
              *profiles.section(subset, profiled, groups), *input_pipelines.section(inputs), *metrics.sections(part),
              *memory_budget.section(subset, directory)]
    # The figures in the order the committed reports show them (memory's before the step breakdown's, though its
    # section comes after): plots.py draws each from its section's entries.
    pngs = (plots.draw_verdict(groups, directory, prefix) + plots.draw_tuned(at_best, directory, prefix)
            + plots.draw_all(subset, directory, prefix)
            + plots.draw_inputs(inputs, directory, prefix) + plots.draw_memory(memory.entries(subset), directory, prefix)
            + plots.draw_breakdown(steps, directory, prefix)
            + plots.draw_utilisation(utilisation.entries(part), directory, prefix))
    sized, crossed = model_size.draw(subset, directory, prefix, ratio)
    if sized:
        blocks += [heading("Throughput against model size", 3), Block("bullets", crossed or [
            "No crossover: each device count keeps its order of approaches across the models trained."]),
            *(Block("image", png) for png in sized)]
    return blocks + [Block("image", png) for png in pngs]


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
            lines += [f"- {line}" for line in block.content] + [""]
        elif block.kind == "table":
            lines += [block.content.to_markdown(index=False, disable_numparse=True), ""]
        elif block.kind == "results":
            lines += [markdown_table(block.content), ""]
        elif block.kind == "image":
            lines += [f"![{block.content.stem}]({block.content.name})", ""]
    return "\n".join(lines) + "\n"
