"""Results across machines (`bench compare DIR_A DIR_B ...`): several results folders, each one machine's sweep,
side by side in compare.md and compare.html.

Each machine is named by the environment its rows recorded (the GPU it trained on, else its CPU model and cores),
and each folder is read the way its own report reads it (`aggregate.configurations`: repeats folded, the cost
metric derived at that machine's price). A configuration (variant, device count, task, batch a device) that ran
on several machines is one row of its task's table, with each machine's throughput per device, its test accuracy,
its samples per dollar where a price is given and its energy per sample where its rows recorded one.

Ratios stay inside a machine: each configuration against the fastest synchronous one on the same machine, task,
precision and device count (`repeats.ratio`, the verdict's 95 % interval). One machine's throughput is never
divided by another's: their tasks, precisions and device types may differ, and the tables say where they do.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.report import html
from bench.analysis.folder import Folder
from bench.analysis.repeats import Runs, measured_runs, ratio
from bench.report.report import markdown
from bench.analysis.verdict import ranks
from bench.metrics import fmt, present
from bench.metrics.blocks import Block
from bench.metrics.cost import PRICE
from bench.results.frame import records_of
from bench.results.jsonl import RESULTS
from bench.results.key import RunKey, config_key, settings, settings_differ
from bench.spec.task import SpecError
from bench.status import Status

ENERGY = "timeseries.energy_j_per_sample"
NO_ENERGY = {  # why a machine's rows carry no energy per sample
    "cpu": "not recorded (sampled from GPU power only; these runs trained on CPU slots)",
    "cuda": "not recorded (these rows carry no GPU power samples)",
}


@dataclass(frozen=True)
class Machine:
    """One results folder: its rows, runs, configurations (repeats folded) and each configuration's runs."""
    folder: Path
    name: str
    rows: list[dict]
    configs: pd.DataFrame
    measured: dict[RunKey, Runs]
    energy: dict[RunKey, float]
    price: float | None


@dataclass(frozen=True)
class Column:
    """What one table column holds: one machine's configurations of one device type and precision."""
    machine: Machine
    device_type: str
    precision: str
    label: str


def machines(folders: list[Path], prices: list[float] | None = None) -> list[Machine]:
    """Each folder read once as one machine; a folder without a finished run is a SpecError naming the fix."""
    out = []
    for folder, price in zip(folders, prices or [None] * len(folders)):
        folder = folder.parent if folder.is_file() else folder  # its results.jsonl named: the folder meant
        results = Folder.read(folder, {PRICE: price} if price else None)
        rows, runs, configs = results.rows, results.runs, results.configs
        if not rows:
            raise SpecError(f"{folder} holds no results ({RESULTS} is missing or empty): pass a folder "
                            "that `bench sweep` or `bench run` wrote (its --out)")
        if not configs["ok"].any():
            raise SpecError(f"{folder}: none of its {len(rows)} runs finished ok, so it has nothing to compare: "
                            "run its sweep again or leave it out")
        energy = {}
        if ENERGY in runs:
            ok = runs[(runs["status"] == Status.OK) & runs[ENERGY].notna()]
            energy = ok.groupby("key", sort=False)[ENERGY].median().to_dict()
        out.append(Machine(folder, machine_name([r for r in rows if r["status"] == Status.OK]), rows, configs,
                           measured_runs(runs), energy, price))
    names = Counter(m.name for m in out)
    return [m if names[m.name] == 1 else _renamed(m, f"{m.name} ({m.folder.name})") for m in out]


def _renamed(machine: Machine, name: str) -> Machine:
    return Machine(machine.folder, name, machine.rows, machine.configs, machine.measured, machine.energy,
                   machine.price)


def _common(values) -> str | None:
    found = Counter(v for v in values if v not in (None, ""))
    return found.most_common(1)[0][0] if found else None


def _cpu(model: str | None) -> str:
    return " ".join((model or "unknown CPU").replace("(R)", "").replace("(TM)", "").split())


def machine_name(rows: list[dict]) -> str:
    """The machine as its rows recorded it: the GPU model (and count) where it trained on GPUs, else the CPU model
    and the cores it had."""
    env = [r.get("environment") or {} for r in rows]
    if any(r.get("device_type") == "cuda" for r in rows):
        gpu = _common([e.get("gpu_model") for e in env]) or _common([r.get("device_name") for r in rows]) or "GPU"
        count = _common([e.get("gpu_count") for e in env]) or 1
        return f"{count}x {gpu}" if count > 1 else gpu
    cores = _common([e.get("cores_available") or e.get("cpu_count") for e in env])
    return _cpu(_common([e.get("cpu_model") for e in env])) + (f", {cores} cores" if cores else "")


def _distinct(values) -> str:
    found = [str(v) for v in dict.fromkeys(values) if v not in (None, "")]
    return " / ".join(found) if found else "-"


def describe(machine: Machine) -> dict[str, str]:
    """The machine's column of the machines table: what it is, what ran on it, what its figures rest on."""
    rows, configs = machine.rows, machine.configs
    env = [r.get("environment") or {} for r in rows]
    ok = configs[configs["ok"]]
    gpus = [f"{e.get('gpu_count') or 1} x {e['gpu_model']}; driver {e.get('driver') or '-'}; "
            f"CUDA {e.get('cuda') or '-'}" for e in env if e.get("gpu_model")]
    slots = []
    for (device_type, cores), group in ok.groupby(["device_type", ok["cores_per_slot"].fillna(1)], sort=False):
        counts = sorted(set(group["world_size"]))
        slots.append(f"{_join(counts)} GPU{'s' if counts[-1] > 1 else ''}" if device_type == "cuda" else
                     f"{_join(counts)} CPU slot{'s' if counts[-1] > 1 else ''} of {int(cores)} core")
    tasks = [f"{t} ({r['model']}, {r['dataset']}), {p}, {s} scaling" for (t, p, s), r in
             ((g, group.iloc[0]) for g, group in ok.groupby(["task", "precision", "scaling"], sort=False))]
    libraries = {k: v for e in env for k, v in (e.get("libraries") or {}).items()
                 if k.startswith(("torch", "tensorflow", "jax"))}
    repeats = sorted(set(Counter(config_key(r) for r in rows).values()))
    dates = sorted(str(r.get("started_at", ""))[:10] for r in rows if str(r.get("started_at", ""))[:4].isdigit())
    energy = (f"{len(machine.energy)} configurations (J / sample: the GPUs' mean power over the throughput)"
              if machine.energy else NO_ENERGY.get(_common(ok["device_type"]), NO_ENERGY["cuda"]))
    return {
        "folder": str(machine.folder),
        "trained on": "; ".join(slots),
        "GPU": _distinct(gpus) if gpus else "none",
        "CPU": _distinct(f"{_cpu(e.get('cpu_model'))}, {e.get('cores_available') or e.get('cpu_count')} cores"
                         for e in env),
        "host": _distinct(r.get("host") for r in rows),
        "task, precision": "; ".join(tasks),
        "frameworks": ", ".join(f"{k} {v}" for k, v in libraries.items()) or "-",
        "python": _distinct(e.get("python") for e in env),
        "runs": f"{len(rows)} of {len(configs)} configurations, "
                + "-".join(map(str, (repeats[0], repeats[-1]) if len(repeats) > 1 else repeats)) + " a configuration",
        "dates": f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else (dates[0] if dates else "-"),
        "commit": _distinct(str(r.get("git_sha") or "")[:7] + ("-dirty" if str(r.get("git_sha")).endswith("-dirty")
                                                               else "") for r in rows),
        "price a device-hour": f"${machine.price:g}" if machine.price else "not given",
        "energy": energy,
    }


def columns(found: list[Machine]) -> list[Column]:
    """One column per machine, device type and precision: a machine with several gets its qualifiers named."""
    out = []
    for machine in found:
        ok = machine.configs[machine.configs["ok"]]
        kinds = list(dict.fromkeys(zip(ok["device_type"], ok["precision"])))
        for device_type, precision in kinds:
            qualifiers = [q for q, several in ((f"{device_type} devices", len({k[0] for k in kinds}) > 1),
                                               (precision, len({k[1] for k in kinds}) > 1)) if several]
            out.append(Column(machine, device_type, precision,
                              machine.name + (f" ({', '.join(qualifiers)})" if qualifiers else "")))
    return out


def _row_key(r: dict) -> tuple:
    """A configuration as the machines share it: task, variant (with its modes), topology, batch a device; the
    scaling rule only above one device, where weak and strong scaling differ."""
    key = r["key"]
    return r["task"], r["series"], key.nodes, key.devices_per_node, key.per_device_batch, \
        key.scaling if key.world_size > 1 else ""


def _shown(r: dict) -> bool:
    """Synthetic-input twins and no-sync bounds are each report's context, not a configuration to compare."""
    return not r["key"].independent and r["key"].input != "synthetic"


def _fastest(column: Column, task: str) -> dict[int, dict]:
    """Per device count, the fastest synchronous configuration of the column on the task (the verdict's rule)."""
    best = {}
    for r in records_of(column.machine.configs):
        if (r["ok"] and ranks(r["key"]) and (r["task"], r["device_type"], r["precision"]) == (
                task, column.device_type, column.precision) and r["key"] in column.machine.measured):
            if r["world_size"] not in best or r["throughput"] > best[r["world_size"]]["throughput"]:
                best[r["world_size"]] = r
    return best


def _cells(r: dict | None, column: Column, fastest: dict[int, dict]) -> list[str]:
    width = 3 + bool(column.machine.price) + bool(column.machine.energy)
    if r is None:
        return ["-"] * width
    if not r["ok"]:
        return ["n/a" if r["status"] == Status.SKIPPED else r["status"]] + ["-"] * (width - 1)
    n = r["world_size"]
    throughput = f"{r['throughput'] / n:,.0f} [{r['ci_low'] / n:,.0f}, {r['ci_high'] / n:,.0f}]"
    best, runs = fastest.get(n), column.machine.measured
    if best is not None and best["key"] == r["key"]:
        against = "fastest"
    elif best is not None and r["key"] in runs:
        x = ratio(runs[r["key"]], runs[best["key"]])
        against = f"{x.value:.2f} [{x.low:.2f}, {x.high:.2f}]"
    else:
        against = "-"
    cells = [throughput, against, fmt(r.get("test_accuracy"), ".4f")]
    if column.machine.price:
        cost = r.get("cost_per_million_samples")
        cells.append(f"{1 / cost:,.3g}" if present(cost) and cost > 0 else "-")
    if column.machine.energy:
        cells.append(fmt(column.machine.energy.get(r["key"]), ".4f"))
    return cells


def _lines(task: str, cols: list[Column]) -> dict[tuple, dict[int, dict]]:
    """The task's configurations by their shared key: each column's line, device counts ascending."""
    lines: dict[tuple, dict[int, dict]] = {}
    for i, column in enumerate(cols):
        for r in records_of(column.machine.configs):
            if (r["task"], r["device_type"], r["precision"]) == (task, column.device_type, column.precision) \
                    and _shown(r):
                lines.setdefault(_row_key(r), {})[i] = r
    return {k: lines[k] for k in sorted(lines, key=lambda k: k[2] * k[3])}  # stable: first seen within a count


def task_table(task: str, cols: list[Column], shared: bool) -> pd.DataFrame | None:
    """The task's configurations that ran on several columns (`shared`), or on one only, one row each, every
    column's figures beside each other; columns with nothing in the table left out. None: no such row."""
    lines = {k: v for k, v in _lines(task, cols).items()
             if (len({cols[i].machine.folder for i in v}) > 1) == shared}
    used = [i for i in range(len(cols)) if any(i in v for v in lines.values())]
    if not lines:
        return None
    header = ["variant", "devices", "batch / device"]
    for column in (cols[i] for i in used):
        header += [f"{column.label}: samples/s a device", f"{column.label}: x fastest", f"{column.label}: test acc."]
        header += [f"{column.label}: M samples / $"] if column.machine.price else []
        header += [f"{column.label}: J / sample"] if column.machine.energy else []
    fastest = {i: _fastest(cols[i], task) for i in used}
    body = []
    for key, found in lines.items():
        _, series, nodes, per_node, per_device, scaling = key
        topology = f"{nodes * per_node}" + (f" ({nodes}x{per_node})" if nodes > 1 else "")
        cells = [series, topology, f"{per_device}" + (f" ({scaling})" if scaling else "")]
        for i in used:
            cells += _cells(found.get(i), cols[i], fastest[i])
        body.append(cells)
    return pd.DataFrame(body, columns=header)


def _task_lines(task: str, cols: list[Column]) -> list[str]:
    """How each column ran the task, and the task settings that differ between them."""
    firsts, out = [], []
    for column in cols:
        rows = [r for r in column.machine.rows if r["status"] == Status.OK and r["task"].get("name") == task
                and r["device_type"] == column.device_type and r["task"].get("precision", "fp32") == column.precision]
        if not rows:
            continue
        t = settings(rows[0]["task"])
        firsts.append(t)
        counts = sorted({r["world_size"] for r in rows})
        devices = (f"{_join(counts)} GPU{'s' if counts[-1] > 1 else ''}" if column.device_type == "cuda" else
                   f"{_join(counts)} CPU slot{'s' if counts[-1] > 1 else ''} of "
                   f"{rows[0].get('cores_per_slot') or 1} core")
        fastest = [f"{r['series']} ({n} device{'s' if n > 1 else ''})"
                   for n, r in sorted(_fastest(column, task).items())]
        out.append(f"**{column.label}**: {t['model']} on {t['dataset']}, {column.precision}, {t['scaling']} "
                   f"scaling, {t['epochs']} epoch{'s' if t['epochs'] != 1 else ''}, {t['window_steps']} steps a "
                   f"window x {t['windows']} windows; {devices}"
                   + (f"; fastest: {', '.join(fastest)}" if fastest else ""))
    differ = list(dict.fromkeys(name for a, b in zip(firsts, firsts[1:]) for name in settings_differ(a, b)))
    if differ:
        out.append("**Settings that differ** between the machines: "
                   + "; ".join(f"{name} ({' · '.join(str(t[name]) for t in firsts)}"
                               + ("; the same run on one device" if name == "scaling" else "") + ")" for name in differ)
                   + ". Figures side by side are each machine's own, not a like-for-like speed-up.")
    elif len(firsts) > 1:
        out.append("Every task setting is the same on each machine.")
    return out


def _join(numbers: list[int]) -> str:
    return ", ".join(map(str, numbers[:-1])) + (" and " if len(numbers) > 1 else "") + str(numbers[-1])


INTRO = (
    "Each folder is one machine, read as its own report reads it: repeats folded (the median of the run medians, "
    "the interval the range over runs; one run: its windows' median and 95 % interval). A row is one configuration "
    "(variant, device count, task, batch a device), `-` where a machine did not run it. **x fastest** is the "
    "configuration's throughput over the fastest synchronous one on the same machine, task, precision and device "
    "count, with the verdict's 95 % interval (one that includes 1 ties it). No figure divides one machine's "
    "throughput by another's: the hardware differs, and so may the task's settings (listed per task). "
    "Synthetic-input twins and no-sync bounds are left out: each folder's report has them.")
ABOVE_ONE = ("A ratio above 1 beside another's **fastest**: the fastest is the highest median (as the verdict picks "
             "it), the ratio that of the runs' geometric means (as the verdict computes it).")


def build(found: list[Machine]) -> list[Block]:
    cols = columns(found)
    described = [describe(m) for m in found]
    table = pd.DataFrame({"": list(described[0]), **{m.name: list(d.values()) for m, d in zip(found, described)}})
    blocks = [Block("heading", "dtbench: results across machines", 1), Block("text", INTRO),
              Block("heading", "Machines", 2), Block("table", table)]
    tasks = list(dict.fromkeys(t for m in found for t in m.configs.loc[m.configs["ok"], "task"]))
    above_one = False
    for task in tasks:
        here = [c for c in cols if ((c.machine.configs["task"] == task) & c.machine.configs["ok"]).any()]
        blocks += [Block("heading", f"Task {task}", 2), Block("bullets", _task_lines(task, here))]
        for shared, title, missing in (
                (True, "On more than one machine", "No configuration of this task ran on more than one machine."),
                (False, "On one machine only", None)):
            body = task_table(task, here, shared)
            if body is not None:
                blocks += [Block("heading", title, 3), Block("table", body)]
                above_one |= any(_above_one(cell) for cell in body.filter(like="x fastest").values.ravel())
            elif missing:
                blocks.append(Block("text", missing))
    notes = [ABOVE_ONE] if above_one else []
    if not any(m.price for m in found):
        notes.append("Samples per dollar: give each machine's price, `--price-per-device-hour USD` once per folder "
                     "in their order.")
    if not any(m.energy for m in found):
        notes.append("Energy per sample: no row of these folders recorded one (it is the GPUs' sampled power, "
                     "NVML, over the throughput: a sweep on a GPU machine with the sampler on records it).")
    return blocks + [Block("notes", notes)]


def _above_one(cell: str) -> bool:
    try:
        return float(cell.split(" ")[0]) > 1
    except ValueError:
        return False


def write(folders: list[Path], out: Path, prices: list[float] | None = None) -> Path:
    """compare.md and compare.html in `out` from the folders, one machine each. Returns compare.md."""
    blocks = build(machines(folders, prices))
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.html").write_text(html.render(blocks, pd.DataFrame(), title="dtbench: results across machines"))
    path = out / "compare.md"
    path.write_text(markdown(blocks))
    return path
