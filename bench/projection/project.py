"""`bench project DIR`: each synchronous approach of a sweep projected to more devices than it ran on, from what
the sweep measured (bench.projection.projection holds the arithmetic and its assumptions).

Per approach, under weak scaling: the compute is its own one-device step (per-device batch / throughput), the
communication at N its collectives on the folder's α–β fits (beyond a node: the link the user gives, or one
`bench collectives` measured across two hosts), and the share of that communication the backward pass hid is
measured where it ran on the most devices. Every input's measured spread is carried through: the one-device and
most-devices runs' intervals over repeats, and the fits' worst residual; the projection is evaluated at each corner
of those ranges, and the lowest and highest are widened by the projection's own error on runs across shaped links
that nothing it fits was fitted on (benchmarks/projection_check.py's held-out points). Nothing here is measured
at the projected counts: every figure it prints is labelled projected, beside its held-out error, and one past
the links and communication-bound steps the check held out says so."""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench import REPO_ROOT
from bench.projection import projection
from bench.projection.networks import Network
from bench.projection.projection import Link
from bench.metrics import present
from bench.analysis.folder import Folder
from bench.results import collectives
from bench.spec.task import SpecError
from bench.spec.variants import PLUGIN_TRAFFIC, VARIANTS
from bench.status import Status

COUNTS = (1, 2, 8, 64, 512)
UNBOUNDED = 3  # an interval's upper end this many times its median is shown as unbounded


def kind(line: pd.Series) -> str | None:
    """The traffic of the approach (projection.TRAFFIC), None where it is not projected: asynchronous, or one
    process driving every device (it cannot span hosts)."""
    variant = VARIANTS.get(line["variant"])
    if variant is None or variant.asynchronous or variant.single_process or variant.max_devices == 1:
        return None
    plugin = line.get("task.accelerate_plugin") if present(line.get("task.accelerate_plugin")) else ""
    traffic = PLUGIN_TRAFFIC.get(plugin, variant.traffic)
    if traffic != "zero":
        return traffic
    stage = int(line["task.zero_stage"]) if present(line.get("task.zero_stage")) else 0
    return f"zero-{stage}" if stage else "ddp"


@dataclass(frozen=True)
class Approach:
    """One approach's measured inputs: the one-device step, the step where it ran on the most devices."""
    series: str
    framework: str
    kind: str
    per_device_batch: int
    grad_bytes: float                      # Ψ: the parameters' bytes
    parts: dict                            # one device's model state by part (bytes)
    sharded: tuple[str, ...] | None        # the parts measured divided over the ranks at measured_n
    rest_mb: float | None                  # one device's peak less its model state: activations and the rest
    compute_s: tuple[float, float, float]  # (median, low, high) of the one-device step
    measured_n: int
    step_n: tuple[float, float, float]     # the same at measured_n
    efficiency_n: float | None
    parameters: float | None = None        # the model's elements (ZeRO-3's gathers depend on them)

    @property
    def bucketed(self) -> bool:
        """Its gradients all-reduced in PyTorch DDP's buckets (projection.unhidden_s)."""
        return self.kind == "ddp" and self.framework in projection.DDP_FRAMEWORKS


@dataclass(frozen=True)
class Projected:
    series: str
    world_size: int
    throughput: tuple[float, float, float]  # samples/s: median, low, high
    efficiency: tuple[float, float, float]
    exposed_fraction: float                 # of the step, at the median inputs
    memory_mb: float | None                 # per device
    error: float = 0.0                      # the held-out error its interval is widened by
    beyond: str = ""                        # why it extrapolates past what the check covered, or ""


def _step(line: pd.Series) -> tuple[float, float, float]:
    """(median, low, high) seconds a step, from the throughput's median and interval over runs."""
    batch, world = line["per_device_batch"], line["world_size"]
    median = batch * world / line["throughput"]
    low = batch * world / line["ci_high"] if present(line.get("ci_high")) else median
    high = batch * world / line["ci_low"] if present(line.get("ci_low")) else median
    return median, low, high


def sharded(one_device: dict[str, float], line: pd.Series) -> tuple[str, ...] | None:
    """The model-state parts a rank held divided by the ranks where the approach ran on the most devices (within
    10 %); None where that run did not measure them. DeepSpeed's ZeRO-1 keeps only its partition of the gradients
    once they are reduced, which the ZeRO paper's stage 1 does not."""
    n = line["world_size"]
    held = {p: line.get(f"memory.model_state_bytes.0.{p}") for p in one_device}
    if not all(present(v) for v in held.values()):
        return None
    return tuple(p for p, whole in one_device.items() if whole and abs(float(held[p]) * n / whole - 1) <= 0.1)


def approaches(configs: pd.DataFrame) -> tuple[list[Approach], list[str]]:
    """The approaches that can be projected (run on one device and on more, synchronously, under weak scaling),
    and why each other multi-device approach is not."""
    ok = configs[(configs["status"] == Status.OK) & configs["throughput"].notna()] if not configs.empty else configs
    by_key = {line["key"]: line for _, line in ok.iterrows()}
    found, skipped = [], []
    widest: dict[str, pd.Series] = {}
    for _, line in ok.iterrows():
        key = line["key"]
        if line["world_size"] > 1 and not key.independent and key.input != "synthetic":
            if key.series not in widest or line["world_size"] > widest[key.series]["world_size"]:
                widest[key.series] = line
    for series, line in widest.items():
        key, traffic = line["key"], kind(line)
        if traffic is None:
            skipped.append(f"{series}: {'asynchronous' if key.asynchronous else 'one process drives every device'}")
            continue
        if key.scaling != "weak":
            skipped.append(f"{series}: strong scaling (the projection holds the per-device batch)")
            continue
        one = by_key.get(key.one_device())
        if one is None or not present(one.get("memory.model_state_bytes.0.parameters")):
            skipped.append(f"{series}: no one-device run with its model state")
            continue
        state = {p: float(one.get(f"memory.model_state_bytes.0.{p}") or 0) for p in
                 ("parameters", "gradients", "optimizer", "master_weights")
                 if present(one.get(f"memory.model_state_bytes.0.{p}"))}
        rest = one["device_peak_mb"] - sum(state.values()) / 2**20 if present(one.get("device_peak_mb")) else None
        found.append(Approach(series, line["framework"], traffic, int(line["per_device_batch"]), state["parameters"],
                              state, sharded(state, line), rest, _step(one), int(line["world_size"]), _step(line),
                              float(line["scaling_efficiency"]) if present(line.get("scaling_efficiency")) else None,
                              float(one["params"]) if present(one.get("params")) else None))
    return found, skipped


def links(fits: list[collectives.Fit], world_size: int, device_type: str) -> tuple[dict[str, Link], float, str]:
    """Each collective's link at the measured world size (a collective the folder did not measure: the
    all-reduce's), the worst relative residual among them, and a note of what was borrowed."""
    here = {f.collective: f for f in fits if f.world_size == world_size and f.nodes == 1 and f.device_type == device_type}
    if not here:
        raise SpecError(f"the folder has no collective microbenchmark at {world_size} devices: run the sweep with "
                        "its analysis (the default) so that it measures them")
    base = here.get("all_reduce") or next(iter(here.values()))
    borrowed = [c for c in projection.BUS_FACTOR if c not in here]
    chosen = {c: Link(here.get(c, base).alpha_s, here.get(c, base).busbw) for c in projection.BUS_FACTOR}
    note = (f"{', '.join(c.replace('_', '-') for c in borrowed)} not measured: the {base.collective.replace('_', '-')}'s "
            "fit stands in" if borrowed else "")
    return chosen, max(f.worst_residual for f in here.values()), note


def at(link: Link, measured_n: int, world_size: int) -> Link:
    """A ring's latency grows with its hops: α measured at `measured_n` ranks, scaled by (N-1)/(n-1)."""
    if world_size <= measured_n or measured_n < 2:
        return link
    return Link(link.alpha_s * (world_size - 1) / (measured_n - 1), link.busbw)


def project(a: Approach, near: dict[str, Link], residual: float, counts: tuple[int, ...],
            devices_per_node: int, far: dict[str, Link] | None, error: float = 0.0,
            inside: dict[str, Link] | None = None, covered: dict | None = None) -> list[Projected]:
    """The approach at each count: every corner of its inputs' ranges, the lowest and highest kept, and beyond one
    device widened by the projection's measured `error` (|projected / measured - 1| at worst). `inside`: a node's
    own link in place of the one measured here (a preset, α at 2 ranks); `covered`: what the check's held-out
    points spanned (its slowest link, its most communication-bound step), past which a figure says it
    extrapolates."""
    def chosen(n: int, scale: float, as_measured: bool = False) -> dict[str, Link]:
        """Each collective's link at n, its times `scale`d (a corner of the fit's residual)."""
        if as_measured:
            links_, at_ranks = near, a.measured_n
        elif n > devices_per_node and far is not None:
            links_, at_ranks = far, 2
        elif inside is not None:
            links_, at_ranks = inside, 2
        else:
            links_, at_ranks = near, a.measured_n
        return {c: Link(at(l, at_ranks, n).alpha_s * scale, l.busbw / scale) for c, l in links_.items()}

    def comm(n: int, scale: float = 1.0, as_measured: bool = False) -> float:
        return projection.communication_s(a.kind, a.grad_bytes, n, chosen(n, scale, as_measured),
                                          elements=a.parameters)

    def step(n: int, compute: float, step_n: float, scale: float) -> tuple[float, float]:
        """(the step at n, the communication exposed in it)"""
        # What the run at measured_n took beyond its compute: communication not hidden, up to what the fit
        # predicts there; the rest (two ranks contending for the machine's cores and memory, a straggler) is not
        # communication and is held as it was measured at every count above one.
        # The measured run was on one host, over the near link, whatever the nodes it is projected onto.
        exposed, predicted = max(0.0, step_n - compute), comm(a.measured_n, scale, as_measured=True)
        hidden = projection.hidden_share(step_n, compute, predicted)
        rest = max(0.0, exposed - predicted)
        exposed_comm = (1 - hidden) * comm(n, scale)
        measured_here = n == a.measured_n and inside is None and not (n > devices_per_node and far is not None)
        if not measured_here:  # the hidden share, carried elsewhere, never hides more than the step has room for
            exposed_comm = max(exposed_comm, projection.unhidden_s(a.kind, a.grad_bytes, n, chosen(n, scale),
                                                                   compute, a.bucketed, a.parameters))
        return compute + exposed_comm + (rest if n > 1 else 0.0), exposed_comm

    result = []
    for n in counts:
        corners = [step(n, *c)[0] for c in itertools.product(a.compute_s, a.step_n, (1 - residual, 1, 1 + residual))]
        shortest, longest = min(corners), max(corners)
        if n > 1:  # measured = projected / (1 + e) for an error e in [-error, error]
            shortest, longest = shortest * (1 - min(error, 0.99)), longest * (1 + error)
        median, exposed_comm = step(n, a.compute_s[0], a.step_n[0], 1.0)
        samples = a.per_device_batch * n
        exposed = exposed_comm / median
        memory = (projection.model_state_bytes(a.kind, a.parts, n, a.sharded) / 2**20 + a.rest_mb
                  if a.rest_mb is not None else None)
        result.append(Projected(a.series, n, (samples / median, samples / longest, samples / shortest),
                                (a.compute_s[0] / median, a.compute_s[0] / longest, a.compute_s[0] / shortest),
                                exposed, memory, error if n > 1 else 0.0,
                                beyond(chosen(n, 1.0)["all_reduce"].busbw, exposed, covered) if n > 1 else ""))
    return result


def beyond(busbw: float, exposed: float, covered: dict | None) -> str:
    """Why a projected figure extrapolates past the check's held-out points: a link slower than the slowest it
    measured, or a step more communication-bound than any it held out; "" where neither."""
    if not covered:
        return ""
    why = []
    if covered.get("slowest_link_gbps") and busbw < covered["slowest_link_gbps"] * 1e9:
        why.append(f"a link slower than any checked ({covered['slowest_link_gbps'] * 8e3:,.0f} Mbit/s)")
    if covered.get("most_exposed_fraction") is not None and exposed > covered["most_exposed_fraction"]:
        why.append(f"communication {exposed:.0%} of the step, past the checked {covered['most_exposed_fraction']:.0%}")
    return "; ".join(why)


# benchmarks/projection_check.py's committed figures: its error on points held out of what it fits.
CHECK = REPO_ROOT / "results" / "projection-heldout-cpu"


def measured_error(check: Path = CHECK) -> dict | None:
    """The projection's error on the check's held-out points (its error.json), or None."""
    path = check / "error.json"
    return json.loads(path.read_text()) if path.exists() else None


def held_out_error(check: dict | None, kind: str) -> float:
    """The error an approach's intervals are widened by: the worst held-out error of its traffic kind, else the
    worst held-out error of any (a kind the check did not hold out); 0 without a check."""
    if not check or check.get("worst_error") is None:
        return 0.0
    return (check.get("worst_error_by_kind") or {}).get(kind, check["worst_error"])


def between_nodes(directory: Path) -> dict[str, Link]:
    """The link between nodes as `bench collectives` measured it across real hosts into `directory`: each
    collective's fit at the fewest ranks over two nodes or more (a collective not measured: the all-reduce's)."""
    across = [f for f in collectives.fits(collectives.load(directory)) if f.nodes >= 2]
    if not across:
        raise SpecError(f"--between-nodes {directory}: no collective measured across nodes there: run `bench "
                        "collectives --devices 2 --nnodes 2 --node-rank R --master-addr A --master-port P --out "
                        f"{directory}` on two hosts")
    # One backend and device type (a folder may hold gloo's and NCCL's), at the fewest ranks measured.
    backend, device_type, fewest = min((f.backend, f.device_type, f.world_size) for f in across)
    here = {f.collective: f for f in across
            if (f.backend, f.device_type, f.world_size) == (backend, device_type, fewest)}
    base = here.get("all_reduce") or next(iter(here.values()))
    # α as at 2 ranks: project() grows it with the hops from there.
    return {c: Link(here.get(c, base).alpha_s / (fewest - 1), here.get(c, base).busbw) for c in projection.BUS_FACTOR}


def folder(results: Folder, counts: tuple[int, ...] = COUNTS, devices_per_node: int | None = None,
           far: Link | dict[str, Link] | None = None, check: dict | None = None, far_source: str = "given",
           inside: Network | None = None, far_name: str = "given") -> dict:
    """Everything `bench project` prints and draws for a results folder; `far`: the link beyond a node, one for
    every collective or each its own, and where it came from (`far_source`, and in a word: `far_name`); `inside`:
    a named link within a node in place of the one measured here (its devices a node the default); `check`: the
    projection's measured error (measured_error()) its intervals are widened by, none where None."""
    directory, configs = results.directory, results.configs
    if not results.rows:
        raise SpecError(f"{directory} holds no rows: name the folder a sweep wrote")
    found, skipped = approaches(configs)
    if not found:
        raise SpecError(f"{directory} has no synchronous approach run on one device and on more: run a sweep "
                        "with --max-devices 2 or more")
    fits = collectives.fits(collectives.load(directory))
    device_type = configs["device_type"].iloc[0]
    measured = max(a.measured_n for a in found)
    near, residual, note = links(fits, measured, device_type)
    per_node = devices_per_node or (inside and inside.devices_per_node) or measured
    inside_links = inside.links() if inside else None
    far_links = far if isinstance(far, dict) or far is None else {c: far for c in projection.BUS_FACTOR}
    covered = check if check and check.get("worst_error") is not None else None

    def at_counts(a: Approach, chosen: tuple[int, ...]) -> list[Projected]:
        return project(a, near, residual, chosen, per_node, far_links, held_out_error(covered, a.kind), inside_links,
                       covered)

    table = {a.series: at_counts(a, counts) for a in found}
    grid = tuple(2 ** i for i in range(max(counts).bit_length()))  # every power of two up to the largest count
    curve = {a.series: at_counts(a, grid) for a in found}
    return {"approaches": found, "skipped": skipped, "table": table, "curve": curve, "residual": residual,
            "check": covered, "far_source": far_source, "far_name": far_name,
            "inside": inside,
            "note": note, "devices_per_node": per_node, "far": far_links, "near": near, "measured": measured}


def checked(check: dict | None) -> str:
    """What the intervals say of the projection's own error."""
    if not check:
        return "not widened by a measured projection error (none measured)."
    missed = f", {check['not_measured']} not measured" if check.get("not_measured") else ""
    kinds = ", ".join(f"{k} ±{e:.0%}" for k, e in sorted((check.get("worst_error_by_kind") or {}).items()))
    return (f"widened by the projection's worst error on points held out of its fitting (±{check['worst_error']:.0%}"
            + (f"; by traffic: {kinds}" if kinds else "") + "), against runs across two hosts on shaped links "
            f"({CHECK.relative_to(REPO_ROOT)}, {check['date'][:10]}: {check['within_10_percent']} of "
            f"{check['configurations']} held-out configurations within ±10 %{missed}), shown beside each figure. "
            "That error was measured with CPU ranks over gloo, one rank a host: on GPUs and their fabrics it is the "
            "best measured figure, not a bound. A figure past the links and communication-bound steps the check "
            "held out says so on its line.")


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def crossings(result: dict) -> list[str]:
    """Where the projected ranking of two approaches flips from the one measured at the most devices, and where
    an approach's exposed communication passes half its step (powers of two up to the largest count)."""
    lines = []
    table = {series: [p for p in points if p.world_size > 1] for series, points in result["curve"].items()}
    for a, b in itertools.combinations(table, 2):
        ahead = table[a][0].throughput[0] >= table[b][0].throughput[0]
        for pa, pb in zip(table[a], table[b]):
            if (pa.throughput[0] >= pb.throughput[0]) != ahead:
                first, second = (b, a) if ahead else (a, b)
                overlap = pa.throughput[1] <= pb.throughput[2] and pb.throughput[1] <= pa.throughput[2]
                lines.append(f"{first} overtakes {second} at {pa.world_size} devices"
                             + (" (their intervals overlap there)" if overlap else ""))
                break
    for series, points in table.items():
        half = next((p.world_size for p in points if p.exposed_fraction > 0.5), None)
        if half:
            lines.append(f"{series}: communication is more than half the step from {half} devices")
    return lines


def caveat(result: dict) -> str:
    """What every projected figure assumes, and how far its intervals reach: said before any of them."""
    far, inside = result["far"] and result["far"]["all_reduce"], result.get("inside")
    within = (f"within a node of {result['devices_per_node']}: {inside.name}, all-reduce α "
              f"{inside.links()['all_reduce'].alpha_s * 1e6:.3g} µs, busbw {inside.busbw_gbps:.4g} GB/s "
              f"({inside.source}); " if inside else "")
    beyond = within + (f"beyond {result['devices_per_node']} devices a node: all-reduce α {far.alpha_s * 1e6:.3g} µs, "
                       f"busbw {far.busbw / 1e9:.3g} GB/s ({result['far_source']})" if far else
                       "no link between nodes given: every link like the node's" if inside else
                       f"every link like this machine's at {result['measured']} devices (no link between nodes given)")
    return ("PROJECTED, not measured: weak scaling (per-device batch held); compute from each approach's one-device "
            f"run; communication from the α–β fits at {result['measured']} devices, ring latency growing with the "
            f"hops; {beyond}; the share of communication hidden behind the backward pass as measured at "
            f"{result['measured']} devices. Intervals: every corner of the inputs' measured ranges (runs' spread, "
            f"fit residual {result['residual']:.0%}); " + checked(result["check"]))


TABLE_TITLE = ("Throughput (samples/s) [interval] ±held-out error · scaling efficiency · memory per device, all "
               "projected:")
NOT_COMMUNICATION = ("Not communication: the step at the measured N beyond its compute and the communication the "
                     "fits predict (ranks contending for the machine, a straggler), held at every count above one. An "
                     f"upper bound shown – is over {UNBOUNDED}× the median: the runs' spread allows the communication "
                     "to be wholly hidden there.")


def table(result: dict) -> pd.DataFrame:
    """Per approach and each count folder() projected to: throughput [interval] · scaling efficiency · memory per
    device."""
    lines = []
    for a in result["approaches"]:
        comm = projection.communication_s(a.kind, a.grad_bytes, a.measured_n, result["near"], elements=a.parameters)
        hidden = projection.hidden_share(a.step_n[0], a.compute_s[0], comm)
        rest = max(0.0, a.step_n[0] - a.compute_s[0] - comm)
        line = {"approach": a.series, "traffic": a.kind,
                "at measured N: hidden · not communication": f"{hidden:.0%} · {rest * 1e3:.1f} ms"}
        for p in result["table"][a.series]:
            upper = _fmt(p.throughput[2]) if p.throughput[2] < UNBOUNDED * p.throughput[0] else "–"
            error = f" ±{p.error:.0%}" if p.error else ""
            line[f"{p.world_size} device{'s' if p.world_size > 1 else ''}"] = (
                f"{_fmt(p.throughput[0])} [{_fmt(p.throughput[1])}, {upper}]{error} · {p.efficiency[0]:.2f} · "
                + (f"{p.memory_mb:,.0f} MB" if p.memory_mb is not None else "–"))
        past = [f"{p.world_size}: {p.beyond}" for p in result["table"][a.series] if p.beyond]
        line["extrapolated (past the check)"] = "; ".join(past) or "–"
        lines.append(line)
    return pd.DataFrame(lines)


def text(result: dict) -> str:
    """What `bench project` prints: the caveat, the table, where rankings flip and communication dominates."""
    cells = table(result)
    lines = [caveat(result)] + ([result["note"] + "."] if result["note"] else [])
    lines += ["", TABLE_TITLE, "", "| " + " | ".join(cells.columns) + " |", "|" + "---|" * len(cells.columns)]
    lines += ["| " + " | ".join(row) + " |" for row in cells.itertuples(index=False)]
    lines += ["", NOT_COMMUNICATION]
    lines += [""] + [f"- {line}" for line in crossings(result)]
    if result["skipped"]:
        lines += ["", "Not projected: " + "; ".join(result["skipped"]) + "."]
    return "\n".join(lines)


def section(results: Folder) -> list:
    """The report's section: the projection to COUNTS devices over this machine's own links, with its figure
    (projection.png); nothing where the folder has no approach run on one device and on more, or no fit."""
    from bench.metrics.blocks import Block, heading, text as paragraph

    try:
        result = folder(results, check=measured_error())
    except SpecError:
        return []
    blocks = [heading("Projected to more devices (not measured)", 2), paragraph(caveat(result))]
    blocks += [paragraph(result["note"] + ".")] if result["note"] else []
    blocks += [paragraph(TABLE_TITLE), Block("table", table(result)), paragraph(NOT_COMMUNICATION)]
    blocks += [Block("bullets", found)] if (found := crossings(result)) else []
    blocks += [paragraph("Not projected: " + "; ".join(result["skipped"]) + ".")] if result["skipped"] else []
    return blocks + [Block("image", figure(result, results.directory / "projection.png")),
                     paragraph("`bench project DIR --between-nodes LINK` or `--alpha-us/--busbw-gbps` projects over "
                               "a link between nodes (docs/projection.md).")]


def links_in_brief(result: dict) -> str:
    far, inside, per_node = result["far"] and result["far"]["all_reduce"], result.get("inside"), result["devices_per_node"]
    if not (far or inside):
        return f"every link like this machine's at {result['measured']} devices"
    within = f"within a node of {per_node}: {inside.name}" if inside else f"within {per_node} devices: this machine's link"
    return within + (f"; beyond: all-reduce α {far.alpha_s * 1e6:.3g} µs, busbw {far.busbw / 1e9:.3g} GB/s "
                     f"({result['far_name']})" if far else "")


def figure(result: dict, path: Path) -> Path:
    """Scaling efficiency against devices (log scale), one panel per group (bench.spec.variants.panels): each
    approach's projected line and band, its measured points drawn over them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.analysis import style
    from bench.spec.variants import panel

    families: dict[str, list[Approach]] = {}
    for a in result["approaches"]:
        families.setdefault(panel(a.framework), []).append(a)
    fig, axes = plt.subplots(1, len(families), figsize=(4.6 * len(families) + 0.6, 5.0), sharey=True, squeeze=False)
    fig.suptitle("PROJECTED scaling efficiency (weak scaling): lines and bands projected, dots measured\n"
                 + links_in_brief(result), fontsize=9)
    for (name, members), ax in zip(families.items(), axes[0]):
        for i, a in enumerate(members):
            colour = style.PALETTE[i % len(style.PALETTE)]
            points = result["curve"][a.series]
            xs = [p.world_size for p in points]
            ax.plot(xs, [p.efficiency[0] for p in points], ls="--", color=colour, lw=1.5, label=a.series)
            ax.fill_between(xs, [p.efficiency[1] for p in points], [min(1.0, p.efficiency[2]) for p in points],
                            color=colour, alpha=0.12, lw=0)
            if a.efficiency_n is not None:
                ax.plot([1, a.measured_n], [1.0, a.efficiency_n], "o", color=colour, ms=6, mec="black", mew=0.6)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(COUNTS), [str(n) for n in COUNTS])
        ax.set_ylim(0, 1.05)
        ax.set_xlabel("devices")
        ax.grid(alpha=0.3)
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    axes[0][0].set_ylabel("scaling efficiency (1 = linear)")
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
