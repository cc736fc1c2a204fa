"""The verdict: per task, precision, device type, device count and scaling, the fastest synchronous approach
and how each other one compares with it, in sentences a person would write.

Each comparison is a throughput ratio (winner / other) with a 95 % interval, from the run medians when both
ran at least twice, else from the windows (`bench.analysis.repeats`). A tie is an interval that includes 1.
Accuracy is compared with the winner's within ACCURACY_TOLERANCE, and with the task's target accuracy.

Stability: where a configuration's runs disagree (their window intervals do not all overlap), a comparison
with it is ranked only when the interval from the run medians, which carries that spread, still excludes 1;
otherwise the verdict says the machine was too noisy to tell, and what to do.

Asynchronous (tf-ps), synthetic-input and no-sync runs never rank: they are context. Where runs with an
approach's own knobs set (`bench tune`, `bench run --set`) are there, a second ranking follows the one as shipped:
each approach at its best measured setting, its defaults among them (`at_best`); a tuned run is never ranked
against a run as shipped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from bench.analysis import input_pipelines, model_pairs
from bench.analysis.folder import Folder
from bench.analysis.repeats import Ratio, Runs, measured_runs, ratio
from bench import metrics
from bench.metrics import present
from bench.metrics.scaling import PHASES_COMMUNICATION
from bench.results.frame import records_of
from bench.results.key import RunKey
from bench.spec import knobs, models
from bench.spec import frameworks
from bench.spec.task import preset_model
from bench.spec.variants import VARIANTS
from bench.status import Status

# Absolute test accuracy two runs may differ by and still count as the same; `bench regress`'s default
# --accuracy-tolerance. The tasks' presets name a target accuracy but no tolerance.
ACCURACY_TOLERANCE = 0.01
ADVICE = ("run more repeats (`--repeats 5`, `make bench REPEATS=5`), compare the two as interleaved duets "
          "(as `bench regress` does), or measure on a quieter machine")


def ranks(key: RunKey) -> bool:
    """Synchronous data parallelism on the real input: the runs a verdict may rank."""
    return not key.independent and key.input != "synthetic" and not key.asynchronous


@dataclass(frozen=True)
class Comparison:
    other: dict   # the configuration's line
    ratio: Ratio  # winner / other
    noisy: bool   # a side's runs disagree and the interval from the runs does not settle it


@dataclass
class Group:
    title: str
    winner: dict | None = None
    comparisons: list[Comparison] = field(default_factory=list)
    ties_beat_too: bool = False  # every approach tied with the winner also beats those the winner beats
    context: list[str] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    unfit: list[dict] = field(default_factory=list)  # did not fit the device memory (--device-memory, or the device's)
    as_shipped: "Group | None" = None  # a ranking of each approach at its best: the same lines' ranking as shipped

    @property
    def budget(self) -> str:
        """The memory the unfit approaches did not fit in: --device-memory's label, else the device's own."""
        return (self.unfit[0]["key"].budget if self.unfit else "") or "the device's memory"

    def _of(self, tie: bool | None = None, noisy: bool = False) -> list[Comparison]:
        return [c for c in self.comparisons if c.noisy == noisy and (tie is None or c.ratio.tie == tie)]

    @property
    def ties(self) -> list[Comparison]:
        return self._of(tie=True)

    @property
    def beaten(self) -> list[Comparison]:
        return self._of(tie=False)

    @property
    def noisy(self) -> list[Comparison]:
        return self._of(noisy=True)


TUNED = "each approach at its best setting of its own knobs"

# A group: the same task, recipe and input pipeline, trained on the same devices at the same batch.
GROUP_BY = ["task", "precision", "scaling", "device_type", "world_size", "global_batch"]


def groups(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> list[Group]:
    """The comparisons of every group of configurations, first-seen task first, device counts ascending."""
    if configs.empty:
        return []
    records = records_of(configs)
    by_key = {r["key"]: r for r in records}
    models_in_order = {m: i for i, m in enumerate(dict.fromkeys(k.model for k in configs["key"]))}  # as swept
    frame = configs[GROUP_BY].assign(
        global_batch=[k.shipped.global_batch for k in configs["key"]],  # a batch_scale setting with its recipe's
        i=range(len(records)), task_order=configs.groupby(["task", "precision", "scaling"], sort=False).ngroup(),
        setting=[(models_in_order[k.model], k.dataset, k.recipe,
                  input_pipelines.INPUT_ORDER.get(k.input, 9), k.loader_workers, k.input_mode)
                 for k in configs["key"]])
    frame = frame.sort_values(["task_order", "device_type", "world_size", "setting"], kind="stable")
    batches = frame.groupby(["task_order", "setting", *GROUP_BY[3:5]])["global_batch"].transform("nunique")
    out = []
    for _, members in frame.assign(batches=batches).groupby(["task_order", "setting", *GROUP_BY[3:]], sort=False):
        found = [records[i] for i in members["i"]]
        shipped = [r for r in found if not r["key"].knobs]
        rankings = [(shipped, False)] + ([(at_best(found), True)] if len(shipped) < len(found) else [])
        shipped_groups: list[Group] = []
        for lines, tuned in rankings:
            apart = model_pairs.differences(lines)
            # Two frameworks' builds of one name that are not the same model: each framework ranked on its own.
            sides = ([side for f in frameworks.names() if (side := [r for r in lines
                                                                     if model_pairs.family(r["variant"]) == f])]
                     if apart else [lines])
            for i, side in enumerate(sides):
                group = _group(side, by_key, measured, members["batches"].iloc[0] > 1, tuned)
                if tuned:
                    group.as_shipped = shipped_groups[i] if i < len(shipped_groups) else None
                else:
                    shipped_groups.append(group)
                if apart:
                    group.title += (f", {models.framework_name(model_pairs.family(side[0]['variant']))}'s build "
                                    f"(not the same model as the other framework's: {', '.join(apart)})")
                if group.winner is not None or group.failed or group.unfit:
                    out.append(group)
    return out


def at_best(lines: list[dict]) -> list[dict]:
    """Each approach at its best: of its configurations that rank (its defaults and each setting of its own knobs),
    the fastest that finished, else its defaults' line (a failure, say), in the lines' order. A setting that changes
    the arithmetic is a best only where its exact accuracy reaches the task's target."""
    best: dict[RunKey, dict] = {}
    for r in lines:
        base = r["key"].shipped
        held = best.get(base)
        eligible = r["ok"] and not misses_target(r)
        if held is None or (eligible and (not held["ok"] or r["throughput"] > held["throughput"])):
            best[base] = r
    chosen = {id(r) for r in best.values()}
    return [r for r in lines if id(r) in chosen]


def misses_target(line: dict) -> bool:
    """A setting that changes the arithmetic (bench.spec.knobs) whose test accuracy is below the task's target."""
    variant = VARIANTS.get(line["variant"])
    if not knobs.changing_arithmetic(knobs.settable(variant.knobs if variant else None), line["key"].knobs):
        return False
    target, accuracy = line.get("target_accuracy"), line.get("test_accuracy")
    return not (present(target) and present(accuracy) and accuracy >= target)


def _group(lines: list[dict], by_key: dict, measured: dict[RunKey, Runs], several_batches: bool,
           tuned: bool = False) -> Group:
    group = Group(_title(lines[0], several_batches, tuned))
    contenders = [r for r in lines if r["ok"] and ranks(r["key"]) and r["key"] in measured]
    group.failed = [r for r in lines
                    if r["status"] in (Status.FAILED, Status.TIMEOUT, Status.INTERRUPTED) and ranks(r["key"])]
    group.unfit = [r for r in lines if r["status"] == Status.DOES_NOT_FIT and ranks(r["key"])]
    if not contenders:
        return group
    winner = group.winner = max(contenders, key=lambda r: r["throughput"])
    best = measured[winner["key"]]
    for r in sorted(contenders, key=lambda r: -r["throughput"]):
        if r is not winner:
            theirs, between = measured[r["key"]], ratio(best, measured[r["key"]])
            shaky = best.disagree or theirs.disagree
            group.comparisons.append(Comparison(r, between, shaky and (between.tie or not between.from_runs)))
    group.comparisons.sort(key=lambda c: c.ratio.value)  # the sentence and the plot read from the closest down
    group.ties_beat_too = all(not ratio(measured[t.other["key"]], measured[b.other["key"]]).tie
                              for t in group.ties for b in group.beaten)
    bound = by_key.get(winner["key"]._replace(independent=True))
    if bound is not None and bound["ok"]:
        group.context.append(f"{name_in_group(winner)} reaches {_pct(winner['throughput'] / bound['throughput'])} of its "
                             f"no-sync bound ({bound['throughput']:,.0f} samples/s)")
    elif present(winner.get(PHASES_COMMUNICATION)):  # the same bound, measured in its own input phases
        group.context.append(f"{name_in_group(winner)} reaches {_pct(1 - winner[PHASES_COMMUNICATION])} of its "
                             "no-sync bound (its own windows trained with the sync off, then undone)")
    for r in lines:
        if r["ok"] and r["key"].asynchronous and not r["key"].independent:
            group.context.append(f"{name_in_group(r)} runs at {r['throughput'] / winner['throughput']:.2f}x of it, "
                                 "updating asynchronously (not ranked)")
    return group


def _title(r: dict, several_batches: bool, tuned: bool = False) -> str:
    n, key = r["world_size"], r["key"]
    devices = f"{n} {'CPU slot' if r['device_type'] == 'cpu' else 'GPU'}{'s' if n > 1 else ''}"
    if key.device_memory:
        devices += f" of {key.device_memory:g} GiB"
    task = f"{r['task']} task" + "".join(f" ({x})" for x in (key.model or preset_model(r["task"]), key.dataset,
                                                               key.recipe) if x)
    details = [r["precision"], f"{r['scaling']} scaling"]
    if several_batches:
        details.append(f"batch {r['global_batch']}")
    if key.input != "memory":
        details.append(f"input {key.input_mode}")
    if tuned:
        details.append(TUNED)
    return f"{devices}, {task}, {', '.join(details)}"


def name_in_group(r: dict) -> str:
    """The configuration's series, less the model and the memory budget its group's title names."""
    series = r["series"]
    for named in (r["key"].model, r["key"].budget) if "key" in r else ():
        series = series.replace(f" ({named})", "") if named else series
    return series + (f" on {r['nodes']} nodes" if r["nodes"] > 1 else "")


def _x(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def _ratio(x: Ratio, times: str = "x") -> str:
    return f"{_x(x.value)}{times} [{_x(x.low)}, {_x(x.high)}]"


def _pct(value: float, decimals: int = 0) -> str:
    return f"{100 * value:.{decimals}f} %"


def _spread(name: str, runs: Runs) -> str:
    medians = (" and ".join(f"{m:,.0f}" for m in runs.medians) if runs.count < 4
               else f"{min(runs.medians):,.0f} to {max(runs.medians):,.0f}")
    window = (f", while each run's windows pin its median to ±{_pct(runs.window_halfwidth)}"
              if runs.window_halfwidth is not None else "")
    return f"{name}'s {runs.count} runs gave {medians} samples/s ({_x(runs.max_over_min)}x apart){window}"


def sentence(group: Group, measured: dict[RunKey, Runs]) -> str:
    """One paragraph of plain sentences for one group (its title not included)."""
    if group.winner is None:
        return " ".join(filter(None, (f"No synchronous run finished ({_failures(group.failed)})." if group.failed
                                      else "", _unfit(group))))
    w, leader = group.winner, name_in_group(group.winner)
    facts = [f"{w['throughput']:,.0f} samples/s", *metrics.facts(w)]
    ties, beaten, noisy = group.ties, group.beaten, group.noisy
    if ties:
        tied = join_words([leader, *(name_in_group(c.other) for c in ties)])
        ratios = "; ".join((f"{name_in_group(c.other)}: " if len(ties) > 1 else "") + f"ratio {_ratio(c.ratio, '')}"
                           for c in ties)
        text = f"{tied} tie ({ratios}), {leader} at {', '.join(facts)}"
    elif not group.comparisons:
        text = f"{leader} is the only synchronous approach measured ({', '.join(facts)})"
    else:
        text = f"{leader} {'leads' if noisy else 'is fastest'} ({', '.join(facts)})"
    if beaten:
        subject = ("both" if len(ties) == 1 else "all of them") if ties and group.ties_beat_too else leader
        text += (f"; {subject} beat{'s' if subject == leader else ''} "
                 + join_words([f"{name_in_group(c.other)} by {_ratio(c.ratio)}" for c in beaten]))
        text += _same_accuracy(w, beaten)
    text = f"{text}." + _flagged_accuracy(w, [*ties, *beaten])
    text += _memory(w, [*ties, *beaten])
    if noisy:
        shaky = [_spread(name_in_group(r), measured[r["key"]]) for r in (w, *(c.other for c in noisy))
                 if measured[r["key"]].disagree]
        against = join_words([f"{name_in_group(c.other)} ({_ratio(c.ratio)})" for c in noisy])
        text += (f" Too noisy here to rank {leader} against {against}: {'; '.join(shaky)}. "
                 f"To tell them apart, {ADVICE}.")
    if group.context:
        text += " Context: " + "; ".join(group.context) + "."
    target = w.get("target_accuracy")
    if present(target) and present(w.get("test_accuracy")) and w["test_accuracy"] < target:
        text += (f" {leader}'s accuracy ({_pct(w['test_accuracy'], 1)}) is below the task's target "
                 f"({_pct(target, 1)}).")
    if group.failed:
        text += f" Did not finish: {_failures(group.failed)}."
    return f"{text} {_unfit(group)}" if group.unfit else text


def _unfit(group: Group) -> str:
    """Which approaches did not fit the device memory, the allocation refused, and the fastest of those that did."""
    if not group.unfit:
        return ""
    budget = group.budget

    def refused(r: dict) -> str:
        asked = r.get("memory.refused_allocation_mb")
        return f"{name_in_group(r)} (an allocation of {asked:,.0f} MiB refused)" if present(asked) else name_in_group(r)

    names = join_words([refused(r) for r in group.unfit])
    verb = "does" if len(group.unfit) == 1 else "do"
    if group.winner is None:
        return f"None fits in {budget}: {names} {verb} not fit."
    if not group.comparisons:
        return f"{names} {verb} not fit in {budget}; only {name_in_group(group.winner)} does."
    return (f"{names} {verb} not fit in {budget}; of the {1 + len(group.comparisons)} that fit, "
            f"{name_in_group(group.winner)} is fastest.")


def accuracy_agrees(winner: dict, other: dict) -> bool | None:
    a, b = winner["test_accuracy"], other["test_accuracy"]
    return abs(a - b) <= ACCURACY_TOLERANCE + 1e-9 if present(a) and present(b) else None


def _same_accuracy(winner: dict, compared: list[Comparison]) -> str:
    same = [c.other for c in compared if accuracy_agrees(winner, c.other)]
    if not same:
        return ""
    return (f" at the same accuracy ({_pct(winner['test_accuracy'], 1)} vs "
            f"{join_words([_pct(r['test_accuracy'], 1) for r in same])})")


def _flagged_accuracy(winner: dict, compared: list[Comparison]) -> str:
    off = [c.other for c in compared if accuracy_agrees(winner, c.other) is False]
    if not off:
        return ""
    return (f" Accuracy flagged, more than {100 * ACCURACY_TOLERANCE:g} point from {name_in_group(winner)}'s "
            f"{_pct(winner['test_accuracy'], 1)}: "
            + join_words([f"{name_in_group(r)} {_pct(r['test_accuracy'], 1)}" for r in off]) + "; check before trusting its speed.")


def _memory(winner: dict, compared: list[Comparison]) -> str:
    """The others' memory per device where it differs from the winner's by more than 10 %."""
    mine = winner.get("device_peak_mb")
    if not present(mine):
        return ""
    apart = [c.other for c in compared if present(c.other.get("device_peak_mb"))
             and abs(c.other["device_peak_mb"] / mine - 1) > 0.1]
    if not apart:
        return ""
    return " Memory per device: " + join_words([f"{name_in_group(r)} {r['device_peak_mb']:,.0f} MiB" for r in apart]) + "."


def _failures(failed: list[dict]) -> str:
    return ", ".join(f"{name_in_group(r)} ({r['status']})" for r in failed)


def join_words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def summary(configs: pd.DataFrame, runs: pd.DataFrame,
            fast_path_warnings: list[str] = ()) -> tuple[list[tuple[str, str]], list[str]]:
    """The verdict: (group title, its sentences) per group, then the fast-path warnings (bench.analysis.fast_path)
    and what the intervals rest on."""
    measured = measured_runs(runs)
    found = groups(configs, measured)
    if not found:
        return [], []
    notes = list(fast_path_warnings)
    if any(not c.ratio.from_runs for g in found for c in g.comparisons):
        notes.append("Where a configuration ran once, its interval comes from the windows of that run and cannot see "
                     "run-to-run drift, which on a shared machine is the larger: repeat the sweep (`--repeats 3`) "
                     "before acting on a close ranking.")
    notes += metrics.notes(configs)
    notes.append("Ratios are throughput of the faster over the slower with a 95 % interval (run medians when both "
                 "ran at least twice, else windows); a tie is an interval that includes 1; accuracies agree within "
                 f"{100 * ACCURACY_TOLERANCE:g} point. Asynchronous, synthetic-input and no-sync runs are context, "
                 "never ranked.")
    return [(g.title, sentence(g, measured)) for g in found], notes


def lines(configs: pd.DataFrame, runs: pd.DataFrame, fast_path_warnings: list[str] = ()) -> list[str]:
    """The verdict as plain text: one line per group ("title: sentences"), then the notes."""
    paragraphs, notes = summary(configs, runs, fast_path_warnings)
    return [f"{title}: {text}" for title, text in paragraphs] + notes


def verdict_lines(results: Folder) -> list[str]:
    """The verdict of a results folder, for the console after `bench sweep` / `bench report`."""
    return lines(results.configs, results.runs, results.warnings)
