"""report.html: the report's blocks as one self-contained page (no network: plots inlined as base64 PNG,
style and script inline). The results table sorts by a click on its header and filters by a text box;
synthetic-input twins and no-sync bounds fold under their real run; every figure's interval is in its cell
or its tooltip (the `title` attribute).
"""
from __future__ import annotations

import base64
import re
from collections import defaultdict
from html import escape

import pandas as pd

from bench.report.html_assets import SCRIPT, STYLE
from bench import metrics
from bench.report.tables import best_cells, headers, row_cells
from bench.metrics import present
from bench.results.frame import records_of
from bench.spec.variants import VARIANTS
from bench.status import Status

# Figures folded over repeats as the median of the runs' (bench.metrics): their range over runs on hover.
RUN_FIGURES = {"step ms": "step_time_ms.median", "startup s": "startup_s", "test acc.": "test_accuracy",
               "time to acc. s": "time_to_accuracy_s"}
# Figures proportional to throughput: their interval is the throughput's, scaled.
PROPORTIONAL = ("per device", "TFLOP/s", "MFU", "of meas. peak")


def render(blocks: list, runs: pd.DataFrame, title: str = "dtbench report") -> str:
    ranges = _run_ranges(runs)
    body = []
    for block in blocks:
        kind, content = block.kind, block.content
        if kind == "heading":
            body.append(f"<h{block.level}>{_inline(content)}</h{block.level}>")
        elif kind == "text":
            body += [f"<p>{_inline(line)}</p>" for line in content.splitlines() if line]
        elif kind in ("bullets", "notes"):
            body.append(f'<ul class="{kind}">' + "".join(f"<li>{_inline(x)}</li>" for x in content) + "</ul>")
        elif kind == "headline":
            body.append('<div class="headline">' + "".join(
                f"<p><strong>{_inline(title)}: {_inline(found[0])}</strong>"
                + "".join(f"<br>{_inline(x)}" for x in found[1:]) + "</p>" for title, found in content) + "</div>")
        elif kind == "verdict":
            paragraphs, notes = content
            body.append('<ul class="verdict">' + "".join(
                f"<li><strong>{_inline(title)}</strong>: {_inline(text)}</li>" for title, text in paragraphs) + "</ul>")
            body += [f'<p class="verdict-note">{_inline(note)}</p>' for note in notes]
        elif kind == "table":
            body.append('<div class="scroll">' + content.to_html(index=False, border=0, classes="data") + "</div>")
        elif kind == "results":
            body.append(_results(content, ranges))
        elif kind == "image":
            data = base64.b64encode(content.read_bytes()).decode("ascii")
            body.append(f'<figure><img alt="{escape(content.stem)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{escape(content.name)}</figcaption></figure>")
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head>\n<body><main>\n" + "\n".join(_figures_in_grids(body))
            + f"\n</main><script>{SCRIPT}</script></body></html>\n")


def _figures_in_grids(parts: list[str]) -> list[str]:
    """Consecutive figures side by side."""
    out, run = [], []
    for part in [*parts, ""]:
        if part.startswith("<figure>"):
            run.append(part)
            continue
        if run:
            out.append('<div class="figures">' + "".join(run) + "</div>")
            run = []
        if part:
            out.append(part)
    return out


def _inline(text: str) -> str:
    """The report's inline markdown: `code` and **bold**."""
    text = escape(text, quote=False)
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", text)


def _run_ranges(runs: pd.DataFrame) -> dict:
    """Per run key and figure: (min, max, runs) over its ok runs."""
    if runs.empty or "throughput.median" not in runs:
        return {}
    ok = runs[(runs["status"] == Status.OK) & runs["throughput.median"].notna()]
    columns = [c for c in ["throughput.median", *RUN_FIGURES.values()] if c in ok]
    out = defaultdict(dict)
    for key, group in ok.groupby("key", sort=False):
        for column in columns:
            values = group[column].dropna()
            if len(values):
                out[key][column] = (values.min(), values.max(), len(values), list(values))
    return out


def _results(configs: pd.DataFrame, ranges: dict) -> str:
    """The results table: a <tbody> per real run with its twins folded under it, sortable and filterable."""
    records = records_of(configs)
    best = set(best_cells(configs))
    index = {r["key"]: i for i, r in enumerate(records)}
    parent = {}
    for i, r in enumerate(records):
        key = r["key"]
        if key.independent or key.input == "synthetic":
            found = index.get(key._replace(independent=False, input="memory", loader_workers=0))
            if found is not None and found != i:
                parent[i] = found
    twins = defaultdict(list)
    for i, p in parent.items():
        twins[p].append(i)
    head = "".join(f'<th scope="col" aria-sort="none"><button type="button">{escape(h)}</button></th>'
                   for h in (headers(records[0]) if records else []))
    groups = []
    for i, r in enumerate(records):
        if i in parent:
            continue
        rows = [_row(r, i, best, index, records, ranges, "main", len(twins[i]))]
        rows += [_row(records[t], t, best, index, records, ranges, "twin", 0) for t in twins[i]]
        groups.append('<tbody class="group">' + "".join(rows) + "</tbody>")
    shown = f"{len(groups)} configurations" + (f", {len(parent)} twins folded under them" if parent else "")
    return ('<div class="controls"><input type="search" class="filter" placeholder="Filter rows: variant, devices, '
            f'status…" aria-label="Filter rows"><span class="count" data-total="{len(groups)}">{shown}</span></div>'
            f'<div class="scroll"><table class="results"><thead><tr>{head}</tr></thead>{"".join(groups)}</table></div>')


def _row(r: dict, i: int, best: set, index: dict, records: list, ranges: dict, kind: str, twins: int) -> str:
    texts = row_cells(r)
    heads = headers(r)
    values = [r["series"], r["world_size"], r["global_batch"], r["status"], *(c.value(r) for c in metrics.columns(r))]
    titles = _titles(r, index, records, ranges) if r["status"] == Status.OK else {heads[4]: str(r.get("error") or "")}
    classes = [kind] + (["failed"] if r["status"] not in (Status.OK, Status.SKIPPED) else []) + (
        ["skipped"] if r["status"] == Status.SKIPPED else [])
    cells = []
    for header, text, value in zip(heads, texts, values):
        attrs = f' data-v="{escape(str(value))}"' if present(value) else ' data-v=""'
        if titles.get(header):
            attrs += f' title="{escape(titles[header])}"'
        css = ["num"] if header not in ("variant", "devices", "batch", "status") else []
        css += ["best"] if (i, header) in best else []
        css += ["error"] if header == heads[4] and r["status"] != Status.OK else []
        content = escape(text)
        if header == "variant" and twins:
            content += (f' <button type="button" class="toggle" aria-expanded="false" title="show the synthetic-input '
                        f'twin and no-sync bound of this run">▸ {twins} twin{"s" if twins > 1 else ""}</button>')
        cells.append(f'<td class="{" ".join(css)}"{attrs}>{content}</td>')
    return f'<tr class="{" ".join(classes)}">{"".join(cells)}</tr>'


def _titles(r: dict, index: dict, records: list, ranges: dict) -> dict[str, str]:
    """Each figure's interval (or range over runs), as a tooltip."""
    key, own = r["key"], ranges.get(r["key"], {})
    titles, throughput = {}, headers(r)[4]
    runs = own.get("throughput.median")
    if runs and runs[2] > 1:
        titles[throughput] = (f"median of {runs[2]} run medians; range over runs {r['ci_low']:,.0f} to "
                              f"{r['ci_high']:,.0f}; runs: {', '.join(f'{m:,.0f}' for m in runs[3])}")
    else:
        titles[throughput] = (f"median over the windows; 95 % interval {r['ci_low']:,.0f} to {r['ci_high']:,.0f} "
                              "(raw windows in results.jsonl)")
    low, high = r["ci_low"] / r["throughput"], r["ci_high"] / r["throughput"]
    for column in metrics.columns(r):
        value = column.value(r)
        if column.header in PROPORTIONAL and present(value):
            spec = ".1%" if column.fmt.endswith("%") else column.fmt
            titles[column.header] = (f"interval {format(value * low, spec)} to {format(value * high, spec)} "
                                     "(the throughput's)")
    for header, baseline in (("scaling eff.", key.one_device()),
                             ("eff. vs single", key.one_device(VARIANTS[key.variant].baseline)
                              if key.variant in VARIANTS and VARIANTS[key.variant].baseline else None)):
        one = records[index[baseline]] if baseline in index else None
        value = r["scaling_efficiency" if header == "scaling eff." else "scaling_efficiency_vs_single"]
        if one is not None and present(value) and one["ok"]:
            n = r["world_size"]
            titles[header] = (f"interval {r['ci_low'] / (n * one['ci_high']):.2f} to "
                              f"{r['ci_high'] / (n * one['ci_low']):.2f}, from the intervals of this run and of "
                              f"{one['series']} on 1 device")
    for header, column in RUN_FIGURES.items():
        spread = own.get(column)
        if spread and spread[2] > 1:
            spec = ".4f" if header == "test acc." else ".1f"
            titles[header] = f"median of {spread[2]} runs; range {spread[0]:{spec}} to {spread[1]:{spec}}"
    if present(r.get("step_p90_ms")):
        titles["step ms"] = titles.get("step ms", "median step") + f"; p90 {r['step_p90_ms']:.1f} ms"
    if present(r.get("eval_samples")):
        titles["eval n"] = "test samples evaluated, each exactly once across ranks"
    return titles
