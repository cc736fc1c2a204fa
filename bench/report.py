"""Tables from a results store: the console summary, report.md, and the scaling analysis."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench import aggregate, allreduce, plots
from bench.results import ResultRow, ResultStore, display_name


def _fmt(value, spec: str = ".0f", none: str = "-") -> str:
    return none if value is None else format(value, spec)


def _step_ms(r: ResultRow) -> float | None:
    return r.step_time_ms["median"] if r.step_time_ms else None


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[ResultRow], object]
    fmt: str
    higher_is_better: bool | None = None  # None: no best to mark


def _throughput_cell(r: ResultRow) -> str:
    t = r.throughput
    runs = f" ({t['runs']} runs)" if t.get("runs") else ""  # folded repeats: the range over runs
    return f"{t['median']:,.0f} [{t['ci_low']:,.0f}, {t['ci_high']:,.0f}]{runs}"


FIGURES = (
    Column("throughput (samples/s) median [95% CI]", lambda r: r.throughput["median"], "throughput", True),
    Column("per device", lambda r: r.per_device_throughput, ",.0f", True),
    Column("scaling eff.", lambda r: r.scaling_efficiency, ".2f", True),
    Column("eff. vs single", lambda r: r.scaling_efficiency_vs_single, ".2f", True),
    Column("step ms", _step_ms, ".1f", False),
    Column("startup s", lambda r: r.startup_s, ".1f", False),
    Column("test acc.", lambda r: r.test_accuracy, ".4f", True),
    Column("eval n", lambda r: r.eval_samples, "d"),
    Column("time to acc. s", lambda r: r.time_to_accuracy_s, ".1f", False),
)
HEADERS = ("variant", "devices", "status") + tuple(c.header for c in FIGURES)
# Folded repeats show "(R runs)" and the range over the runs in place of the 95 % interval.


def _cells(r: ResultRow) -> list[str]:
    topo = f"{r.world_size}" + (f" ({r.nodes}x{r.devices_per_node})" if r.nodes > 1 else "")
    device = r.device_type + ("*" if _cpu_limits(r) else "")
    status = r.status if r.status != "skipped" else "n/a"
    if r.status != "ok":
        reason = (r.error or "-").splitlines()[0][:70]
        return [display_name(r), f"{topo} {device}", status, reason] + ["-"] * (len(FIGURES) - 1)
    figures = [_throughput_cell(r) if c.fmt == "throughput" else _fmt(c.value(r), c.fmt) for c in FIGURES]
    return [display_name(r), f"{topo} {device}", status, *figures]


def text_table(rows: list[ResultRow]) -> str:
    body = [_cells(r) for r in rows]
    widths = [max(len(str(c)) for c in col) for col in zip(HEADERS, *body)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in [HEADERS, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _markdown(headers, body) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(map(str, cells)) + " |" for cells in body])


def markdown_table(rows: list[ResultRow]) -> str:
    """The results table with the best figure per column in bold (independent runs compete in none)."""
    body = [_cells(r) for r in rows]
    for index, column in enumerate(FIGURES, start=3):
        if column.higher_is_better is None:
            continue
        scored = [(column.value(r), i) for i, r in enumerate(rows)
                  if r.status == "ok" and not r.independent and column.value(r) is not None]
        if len(scored) > 1:
            best = (max if column.higher_is_better else min)(scored)[0]
            for value, i in scored:
                if value == best:
                    body[i][index] = f"**{body[i][index]}**"
    return _markdown(HEADERS, body)


# ---------------------------------------------------------------- scaling analysis

def _independent_twin(row: ResultRow, rows: list[ResultRow]) -> ResultRow | None:
    for other in reversed(rows):
        if (other.independent and other.status == "ok" and other.variant == row.variant and other.engine == row.engine
                and (other.nodes, other.devices_per_node) == (row.nodes, row.devices_per_node)
                and other.device_type == row.device_type and other.task["name"] == row.task["name"]
                and other.task["precision"] == row.task["precision"]):
            return other
    return None


def breakdown(rows: list[ResultRow], table: list[dict]) -> list[dict]:
    """Per multi-device run: measured step, compute-only step (its no-sync twin), communication floor."""
    out = []
    for r in rows:
        if r.status != "ok" or r.independent or r.world_size < 2 or not r.step_time_ms:
            continue
        twin = _independent_twin(r, rows)
        params = r.task.get("params")
        grad_bytes = params * 4 if params else None  # gradients are fp32 (autocast keeps fp32 weights)
        busbw = (allreduce.busbw_at(table, r.world_size, r.nodes, grad_bytes)
                 if grad_bytes and r.framework in ("torch", "accelerate") else None)
        out.append({
            "row": r, "step_ms": _step_ms(r), "compute_ms": _step_ms(twin) if twin else None,
            "comm_cost": 1 - r.throughput["median"] / twin.throughput["median"] if twin else None,
            "floor_ms": allreduce.communication_floor_ms(grad_bytes, r.world_size, busbw) if grad_bytes else None,
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
    body = [[e["row"].variant, e["row"].world_size, _fmt(e["step_ms"], ".1f"), _fmt(e["compute_ms"], ".1f"),
             _cost_cell(e["comm_cost"]),
             _fmt(e["floor_ms"], ".2f"), _fmt(e["busbw_gbps"], ".3f"), _fmt(e["grad_mb"], ".2f")]
            for e in entries]
    return _markdown(headers, body)


def allreduce_table(table: list[dict]) -> str:
    topologies = sorted({(r["backend"], r["device_type"], r["nodes"], r["devices_per_node"]) for r in table})
    sizes = sorted({r["size_bytes"] for r in table})
    headers = ("backend", "devices") + tuple(f"{s / 2**20:g} MiB" if s >= 2**20 else f"{s // 1024} KiB" for s in sizes)
    body = []
    for backend, device_type, nodes, per_node in topologies:
        latest = {r["size_bytes"]: r for r in table if (r["backend"], r["device_type"], r["nodes"],
                                                        r["devices_per_node"]) == (backend, device_type, nodes, per_node)}
        body.append([f"{backend} ({device_type})", f"{nodes * per_node} ({nodes}x{per_node})"]
                    + [_fmt(latest[s]["busbw_gbps"], ".3f") if s in latest else "-" for s in sizes])
    return _markdown(headers, body)


# ---------------------------------------------------------------- report.md

def _cpu_limits(row: ResultRow) -> list[str]:
    return [n for n in row.notes if n.startswith("cpu: ")]


def footnotes(rows: list[ResultRow]) -> list[str]:
    limits = dict.fromkeys(f"{r.variant}: {n[5:]}" for r in rows for n in _cpu_limits(r))
    notes = [f"`cpu*` {limit}; larger topologies show n/a." for limit in limits]
    if any(r.oversubscribed for r in rows):
        notes.append("Some runs had more device slots than cores (`oversubscribed` in the row).")
    notes.append("Scaling efficiency = throughput(N) / (N x throughput(1)) of the same variant and task; "
                 "eff. vs single uses the framework's plain single-device loop (torch-single, tf-single) as "
                 "throughput(1). CPU device slot = 1 core unless --cores-per-slot says otherwise.")
    if any(r.independent for r in rows):
        notes.append("(no sync): the same variant with gradient synchronisation switched off, each replica on "
                     "its own shard: the no-communication upper bound (no accuracy: the replicas diverge).")
    return notes


def write_report(directory: Path) -> Path:
    store = ResultStore(directory)
    runs = store.rows()
    rows = aggregate.fold_all(runs)
    table = allreduce.load(directory)
    env = rows[-1].environment if rows else {}
    header = ["# dtbench report", "",
              f"{len(runs)} runs in `{store.jsonl.name}`"
              + (f", repeats folded into {len(rows)} rows (median of run medians [range over runs])"
                 if len(rows) < len(runs) else "") + ".", "",
              f"- host: {rows[-1].host if rows else '-'}; commit: {rows[-1].git_sha if rows else '-'}",
              f"- CPU: {env.get('cpu_model', '-')} ({env.get('cores_available', '-')} cores available)",
              f"- GPU: {env.get('gpu_model', 'none')}; driver {env.get('driver', '-')}; "
              f"CUDA {env.get('cuda') or '-'}; NCCL {env.get('nccl') or '-'}",
              f"- python {env.get('python', '-')}; "
              + ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items()),
              ""]
    body = []
    for key in dict.fromkeys(f"{r.task['name']}/{r.task['precision']}" for r in rows):
        subset = [r for r in rows if f"{r.task['name']}/{r.task['precision']}" == key]
        body += [f"## task {key}", "", markdown_table(subset), "", "Best per column in **bold**.", ""]
        entries = breakdown(subset, table)
        if entries:
            body += ["### Where the step time goes", "",
                     "Compute-only = the same run with gradient synchronisation off; communication cost = "
                     "1 - throughput / no-sync throughput (negative: the no-sync run was slower, i.e. run-to-run "
                     "noise exceeded the cost; repeat the runs); all-reduce floor = gradient bytes x 2(n-1)/n / "
                     "busbw from the microbenchmark below (torch backends).", "", breakdown_table(entries), ""]
        prefix = key.replace("/", "-")
        for png in plots.draw_all(subset, directory, prefix) + plots.draw_breakdown(entries, directory, prefix):
            body += [f"![{png.stem}]({png.name})", ""]
    if table:
        body += ["## All-reduce microbenchmark (busbw, GB/s)", "", "busbw = algbw x 2(n-1)/n.", "",
                 allreduce_table(table), ""]
    body += [f"- {n}" for n in footnotes(rows)]
    path = directory / "report.md"
    path.write_text("\n".join(header + body) + "\n")
    store.export_csv()
    return path
