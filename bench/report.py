"""Tables from a results store: the console summary and report.md."""
from __future__ import annotations

from pathlib import Path

from bench import plots
from bench.results import ResultRow, ResultStore

COLUMNS = ("variant", "devices", "status", "throughput (samples/s) median [95% CI]", "per device",
           "scaling eff.", "step ms", "startup s", "test acc.", "eval n", "time to acc. s")


def _fmt(value, spec: str = ".0f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def table_rows(rows: list[ResultRow]) -> list[list[str]]:
    out = []
    for r in rows:
        topo = f"{r.world_size}" + (f" ({r.nodes}x{r.devices_per_node})" if r.nodes > 1 else "")
        status = r.status if r.status != "skipped" else "n/a"
        if r.status == "ok":
            t = r.throughput
            cells = [f"{t['median']:,.0f} [{t['ci_low']:,.0f}, {t['ci_high']:,.0f}]",
                     _fmt(r.per_device_throughput, ",.0f"), _fmt(r.scaling_efficiency, ".2f"),
                     _fmt(r.step_time_ms and r.step_time_ms["median"], ".1f"), _fmt(r.startup_s, ".1f"),
                     _fmt(r.test_accuracy, ".4f"), _fmt(r.eval_samples, "d"), _fmt(r.time_to_accuracy_s, ".1f")]
        else:
            cells = [(r.error or "").splitlines()[0][:70] if r.error else "-"] + ["-"] * 7
        device = r.device_type + ("*" if _cpu_limits(r) else "")
        out.append([r.variant, f"{topo} {device}", status, *cells])
    return out


def text_table(rows: list[ResultRow]) -> str:
    body = table_rows(rows)
    widths = [max(len(str(c)) for c in col) for col in zip(COLUMNS, *body)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in [COLUMNS, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# Column index -> (value of a row, higher is better): the best ok row per column is marked in bold.
BEST = {
    3: (lambda r: r.throughput["median"], True),
    4: (lambda r: r.per_device_throughput, True),
    5: (lambda r: r.scaling_efficiency, True),
    6: (lambda r: r.step_time_ms["median"] if r.step_time_ms else None, False),
    7: (lambda r: r.startup_s, False),
    8: (lambda r: r.test_accuracy, True),
    10: (lambda r: r.time_to_accuracy_s, False),
}


def markdown_table(rows: list[ResultRow]) -> str:
    body = table_rows(rows)
    for column, (value, higher) in BEST.items():
        scored = [(value(r), i) for i, r in enumerate(rows) if r.status == "ok" and value(r) is not None]
        if len(scored) > 1:
            best = (max if higher else min)(scored)[0]
            for v, i in scored:
                if v == best:
                    body[i][column] = f"**{body[i][column]}**"
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines)


def _cpu_limits(row: ResultRow) -> list[str]:
    return [n for n in row.notes if n.startswith("cpu: ")]


def footnotes(rows: list[ResultRow]) -> list[str]:
    limits = dict.fromkeys(f"{r.variant}: {n[5:]}" for r in rows for n in _cpu_limits(r))
    notes = [f"`cpu*` {limit}; larger topologies show n/a." for limit in limits]
    if any(r.oversubscribed for r in rows):
        notes.append("Some runs had more device slots than cores (`oversubscribed` in the row).")
    notes.append("Scaling efficiency = throughput(N) / (N x throughput(1)) of the same variant and task; "
                 "CPU device slot = 1 core unless --cores-per-slot says otherwise.")
    return notes


def write_report(directory: Path) -> Path:
    store = ResultStore(directory)
    rows = store.rows()
    env = rows[-1].environment if rows else {}
    header = [f"# dtbench report", "",
              f"{len(rows)} runs in `{store.jsonl}`.", "",
              f"- host: {rows[-1].host if rows else '-'}; commit: {rows[-1].git_sha if rows else '-'}",
              f"- CPU: {env.get('cpu_model', '-')} ({env.get('cores_available', '-')} cores available)",
              f"- GPU: {env.get('gpu_model', 'none')}; driver {env.get('driver', '-')}; CUDA {env.get('cuda') or '-'}; NCCL {env.get('nccl') or '-'}",
              f"- python {env.get('python', '-')}; " + ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items()),
              ""]
    tasks = list(dict.fromkeys(r.task["name"] + "/" + r.task["precision"] for r in rows))
    body = []
    for key in tasks:
        subset = [r for r in rows if r.task["name"] + "/" + r.task["precision"] == key]
        body += [f"## task {key}", "", markdown_table(subset), "", "Best per column in **bold**.", ""]
        for png in plots.draw_all(subset, directory, key.replace("/", "-")):
            body += [f"![{png.stem}]({png.name})", ""]
    body += [f"- {n}" for n in footnotes(rows)]
    path = directory / "report.md"
    path.write_text("\n".join(header + body) + "\n")
    store.export_csv()
    return path
