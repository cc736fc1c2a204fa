"""`bench tune`: each approach at its best within a time budget, and the same approaches as shipped beside it.

1. Each approach's defaults, one short run (a few timed windows, one epoch cut short): what a short run and a
   full-length one cost here.
2. Its other settings (each knob's values worth trying, one at a time from the defaults, bench.spec.knobs) join the
   race as far as the budget allows, round-robin over the approaches, and race: one more short run a round for
   every setting still in, a setting out once its interval lies below its approach's leader's
   (bench.sweep.race), until each approach has one left or the next round would eat into the confirmation.
3. The confirmation: each approach's best setting and its defaults, full length, interleaved, `repeats` times.

The short runs go to OUT/search (kept, never ranked); the confirmation's rows to OUT, where the report ranks the
runs as shipped and the runs with knobs set apart (bench.analysis.verdict).
"""
from __future__ import annotations

import dataclasses
import math
import statistics
import time
from pathlib import Path
from typing import Callable

from bench.results import ResultRow, ResultStore
from bench.results.jsonl import SEARCH
from bench.results.key import config_key
from bench.run.runspec import RunSpec
from bench.spec import knobs
from bench.spec.devices import Machine
from bench.spec.task import SpecError, TaskSpec
from bench.status import Status
from bench.sweep import duet, race, resume, runner
from bench.sweep.duet import INTERLEAVED, TURNS
from bench.worker import data

SHORT_WINDOWS = 3
DUET_WINDOWS = 7  # a duet's short runs: the median of 7 paired windows' ratios, steadier than of 3


def approach_name(spec: RunSpec) -> str:
    """The approach as shipped, as its series names it (a ZeRO stage apart from another)."""
    return spec.key.shipped.series


def tunable(specs: list[RunSpec], world_size: int) -> list[RunSpec]:
    """A sweep's approaches to tune (`bench sweep --tune`): those with knobs, synchronous, on the real input, with
    gradients synchronised, at `world_size` devices, once each."""
    chosen = {}
    for spec in specs:
        if (spec.world_size == world_size and knobs.declared(spec.variant.knobs) and not spec.independent
                and not spec.variant.asynchronous and spec.task.data.input != "synthetic"):
            chosen.setdefault(approach_name(spec), spec)
    return list(chosen.values())


def candidates(spec: RunSpec, opt_ins: tuple[str, ...] = ()) -> list[str]:
    """The settings raced for an approach: its defaults (""), then each knob's values worth trying, one at a time:
    its own knobs and every approach's (bench.spec.knobs.COMMON), a knob with an opt-in flag only where `opt_ins`
    names it (--tune-batch: the batch changes the recipe), compile only where the approach compiles."""
    declared = tuple(k for k in knobs.settable(spec.variant.knobs) if (not k.opt_in or k.opt_in in opt_ins)
                     and (k is not knobs.COMPILE or spec.variant.compiles))
    tried = [knobs.canonical(declared, [f"{k.name}={k.text(value)}"], spec.variant.name)
             for k in declared for value in k.tries]
    full = spec.task.replace(steps_per_epoch=epoch_steps(spec.task))  # a setting fits the full-length runs too
    return [""] + [setting for setting in tried if not knobs.misfit(declared, setting, full)]


def short(task: TaskSpec, windows: int = SHORT_WINDOWS) -> TaskSpec:
    """The task cut to its warm-up and `windows` timed windows, in one epoch."""
    steps = task.timing.warmup_steps + windows * task.timing.window_steps
    return task.replace(epochs=1, windows=windows, steps_per_epoch=steps)


def steps_trained(task: TaskSpec) -> int:
    """The optimizer steps a run of `task` trains: its timed steps on synthetic input, else its epochs over the
    cached training set (an image folder exported from it holds as many)."""
    timing = task.timing
    if (steps := epoch_steps(task)) is None:
        return timing.warmup_steps + timing.window_steps * timing.windows
    return steps * task.recipe.epochs


def epoch_steps(task: TaskSpec) -> int | None:
    """The optimizer steps of one epoch over the cached training set; None where the run trains only its timed
    steps (synthetic input) or reads an image folder."""
    if task.synthetic or task.data.dataset == "imagefolder":
        return None
    return task.steps_per_epoch(len(data.load(data.prepare(task))["train_y"]))


def full_length_s(row: ResultRow, short_task: TaskSpec, full_task: TaskSpec) -> float:
    """What a full-length run of the same setting will take, from its short run: the same start-up and teardown,
    the training scaled by the steps trained, the evaluation and checkpoints by the epochs (a short run's
    evaluation reads the whole test set too: scaled by the steps, it priced a default-task run here at twice its
    length). Without the row's wall split, everything after the start-up scaled by the steps."""
    steps = max(1.0, steps_trained(full_task) / max(1, steps_trained(short_task)))
    split = row.wall_split or {}
    if "training" not in split:
        startup = split.get("startup") or 0.0
        return startup + max(0.0, (row.wall_s or 0.0) - startup) * steps
    epochs = max(1.0, full_task.recipe.epochs / short_task.recipe.epochs)
    return (split["startup"] + split["training"] * steps + (split["evaluation"] + split["checkpoints"]) * epochs
            + split["other"] + split["teardown"])


@dataclasses.dataclass
class Tuned:
    """What the tuning found for one approach: its best setting and the confirmation's runs of it and of its
    defaults."""
    variant: str         # the approach as its series names it: "deepspeed (ZeRO-2)"
    best: str
    settings: int        # the settings it has (its defaults and each knob's values worth trying)
    settings_raced: int  # those the budget held (a short run each at least)
    default_runs: list[float]
    best_runs: list[float]
    settings_unfinished: int = 0  # of those raced: did not fit the device memory, or failed
    pairing: str = "none"         # how its runs were paired: turns | interleaved | none (bench.sweep.duet)
    paired_logs: list[float] = dataclasses.field(default_factory=list)  # the confirmation's duets' log ratios
    standing: dict[str, str] = dataclasses.field(default_factory=dict)  # each raced setting's race.decision

    @property
    def gain(self) -> float | None:
        """The best setting over the defaults: the confirmation's paired ratio (the duets' mean log ratio), else
        the medians' ratio (None where either has no run)."""
        if self.paired_logs:
            return math.exp(statistics.mean(self.paired_logs))
        if not self.default_runs or not self.best_runs:
            return None
        return statistics.median(self.best_runs) / statistics.median(self.default_runs)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The paired ratio's 95 % interval over the confirmation's duets (two at least)."""
        if len(self.paired_logs) < 2:
            return None
        return tuple(math.exp(v) for v in race.paired_interval(self.paired_logs))


class BudgetTooSmall(SpecError):
    """The budget does not hold the confirmation: found once the defaults' short runs priced a full-length run."""


def now() -> float:
    """The clock the budget is kept by."""
    return time.monotonic()


class Replay:
    """A stopped tuning's finished runs (`bench tune --resume`), handed back in the order they were asked for, each
    charged its recorded time against the budget: the resumed tuning makes the choices the whole one would have."""

    def __init__(self, folder: Path | None, allow_mixed_revisions: bool = False):
        self.rows = resume.finished(folder, allow_mixed_revisions) if folder and folder.exists() else {}
        self.seconds = 0.0  # the recorded time of the runs handed back

    def skip(self, specs: list[RunSpec]) -> None:
        """Leave out the rows of `specs`, runs of the folder that are not the tuning's (a sweep's as shipped)."""
        for spec in specs:
            if kept := self.rows.get(resume.identity(spec)):
                kept.pop(0)

    def take(self, spec: RunSpec) -> ResultRow | None:
        kept = self.rows.get(resume.identity(spec))
        if not kept:
            return None
        row = ResultRow.from_dict(kept.pop(0))
        self.seconds += row.wall_s or 0.0
        return row

    def duet(self, specs: tuple[RunSpec, RunSpec], out: Path, machine: Machine, first: int,
             pairing: str) -> list[ResultRow]:
        """A pair's two rows: the folder's where it holds both, else the pair played (bench.sweep.duet) and
        stored."""
        identities = [resume.identity(spec) for spec in specs]
        if all(len(self.rows.get(i) or []) >= identities.count(i) for i in identities):
            return [self.take(spec) for spec in specs]
        return duet.play(specs, out, machine, first, pairing)

    def run(self, specs: list[RunSpec], out: Path, machine: Machine) -> list[ResultRow]:
        """The runs of `specs`: those the folder holds handed back, the others run in their planned order."""
        rows = [self.take(spec) for spec in specs]
        ran = iter(runner.run_all([spec for spec, row in zip(specs, rows) if row is None], out, machine))
        return [row or next(ran) for row in rows]


def tune(specs: list[RunSpec], out: Path, machine: Machine, budget_s: float, repeats: int,
         say: Callable[[str], None] = print, resumed: bool = False, allow_mixed_revisions: bool = False,
         others: list[RunSpec] = (), opt_ins: tuple[str, ...] = (), pairing: str = TURNS) -> list[Tuned]:
    """Race each approach's settings within `budget_s` seconds, then confirm its best and its defaults. `resumed`:
    the runs a stopped tuning of the same request left in `out` count as run, and their time as spent; `others`
    are the runs of `out` that are not the tuning's (the sweep's before it); `opt_ins` the flags of the knobs raced
    only when asked (--tune-batch, --tune-compile); `pairing` how a setting's runs are paired with its defaults'
    (bench.sweep.duet; "none": each short run on its own)."""
    if pairing == "none":
        return tune_unpaired(specs, out, machine, budget_s, repeats, say, resumed, allow_mixed_revisions, others,
                             opt_ins)
    return tune_paired(specs, out, machine, budget_s, repeats, say, resumed, allow_mixed_revisions, others,
                       opt_ins, pairing)


class Spent:
    """What a tuning has spent of its budget, called: the time since it began, and the recorded time of the runs a
    stopped one left that it takes back (`searched`: the short runs in OUT/search; `confirmed`: the full-length
    ones in OUT, less `others`, the runs of OUT that are not the tuning's)."""

    def __init__(self, out: Path, resumed: bool, allow_mixed_revisions: bool, others: list[RunSpec]):
        self.started = now()
        self.searched = Replay(out / SEARCH if resumed else None, allow_mixed_revisions)
        self.confirmed = Replay(out if resumed else None, allow_mixed_revisions)
        self.confirmed.skip(list(others))

    def __call__(self) -> float:
        return now() - self.started + self.searched.seconds + self.confirmed.seconds


def tune_unpaired(specs: list[RunSpec], out: Path, machine: Machine, budget_s: float, repeats: int,
                  say: Callable[[str], None], resumed: bool, allow_mixed_revisions: bool, others: list[RunSpec],
                  opt_ins: tuple[str, ...]) -> list[Tuned]:
    """The race of short runs one after another, each setting judged on its own windows (the machine's drift
    included): `--pairing none`."""
    spent = Spent(out, resumed, allow_mixed_revisions, others)
    searched, confirmed = spent.searched, spent.confirmed

    by_variant = {approach_name(spec): spec for spec in specs}
    raced = {name: candidates(spec, opt_ins) for name, spec in by_variant.items()}
    say(f"tuning {', '.join(f'{n} ({len(c)} settings)' for n, c in raced.items())} within {budget_s / 60:g} min: "
        f"each approach's defaults first, then as many settings as the budget holds, raced in short runs of "
        f"{SHORT_WINDOWS} windows; then each approach's best and its defaults, {repeats} full-length runs each")

    def short_run(name: str, setting: str) -> ResultRow:
        spec = by_variant[name]
        [row] = searched.run([dataclasses.replace(spec, task=short(spec.task).with_knobs(setting))],
                             out / SEARCH, machine)
        return row

    def windows(row: ResultRow) -> list[float]:
        return list(row.throughput["windows"]) if row.status == Status.OK and row.throughput else []

    state: dict[str, dict[str, list[float]]] = {}
    short_s, full_s = {}, {}
    for name, spec in by_variant.items():
        row = short_run(name, "")
        state[name] = {"": windows(row)}
        short_s[name] = row.wall_s or 0.0
        full_s[name] = full_length_s(row, short(spec.task), spec.task)
    short_cost = max(short_s.values())
    reserve = race.confirmation_s(full_s.values(), repeats)
    if spent() + reserve > budget_s:
        # Confirming anyway would overrun the budget by itself: stop, with the budget that holds it.
        raise BudgetTooSmall(
            f"not tuned: the confirmation ({len(by_variant)} approaches' best and defaults, {repeats} full-length "
            f"runs each, {min(full_s.values()):.0f}-{max(full_s.values()):.0f} s a run here) needs "
            f"{reserve / 60:.1f} min after the "
            f"{spent() / 60:.1f} spent pricing it, more than the {budget_s / 60:g}-minute budget: give --budget "
            f"{math.ceil((spent() + reserve) / 60 * 1.25)} or more (with --resume the runs made count), or fewer "
            f"approaches")
    say(f"priced here: a short run up to {short_cost:.0f} s, a full-length one {min(full_s.values()):.0f}-"
        f"{max(full_s.values()):.0f} s; the confirmation "
        f"keeps back {reserve / 60:.1f} min, {max(0.0, budget_s - spent() - reserve) / 60:.1f} min are left to race "
        f"the other settings")
    # The other settings join round-robin while one short run each still fits beside the confirmation.
    waiting = {name: settings[1:] for name, settings in raced.items()}
    while any(waiting.values()):
        for name in list(waiting):
            if waiting[name] and spent() + short_s[name] <= budget_s - reserve:  # its own short run's cost
                setting = waiting[name].pop(0)
                state[name][setting] = windows(short_run(name, setting))
            else:
                waiting[name] = []
    ran = {name: len(samples) for name, samples in state.items()}
    unfinished = {name: sum(not v for v in samples.values()) for name, samples in state.items()}
    state = {name: {k: v for k, v in samples.items() if v} for name, samples in state.items()}
    state = race.prune(state)
    while entries := race.next_round(state, spent(), budget_s, short_cost, full_s, repeats):
        for entry in entries:
            state[entry.approach][entry.knobs] += windows(short_run(entry.approach, entry.knobs))
        state = race.prune(state)
    best = {name: race.leader(samples) if samples else "" for name, samples in state.items()}
    confirm = [dataclasses.replace(by_variant[name], task=by_variant[name].task.with_knobs(setting))
               for name in by_variant for setting in dict.fromkeys([best[name], ""])]
    rows = confirmed.run(confirm * repeats, out, machine)
    medians = {}
    for row in rows:
        if row.status == Status.OK and row.throughput:
            key = config_key(row.to_dict())
            medians.setdefault((key.shipped.series, key.knobs), []).append(row.throughput["median"])
    # Where the defaults are best, their runs are the best's too ("" is their setting).
    return [Tuned(name, best[name], len(raced[name]), ran[name], medians.get((name, ""), []),
                  medians.get((name, best[name]), []), unfinished[name]) for name in by_variant]


MAX_DUETS = 10  # a setting still straddling 1 after this many duets gains too little to find here


def out_of_memory(row: ResultRow) -> bool:
    """The run did not fit beside its partner: its allocator refused it memory."""
    return row.status == Status.DOES_NOT_FIT or (row.status == Status.FAILED and "out of memory" in
                                                  (row.error or "").lower())


def pairing_floor_s(specs: list[RunSpec], out: Path, repeats: int) -> float | None:
    """Before any run: what the paired confirmation alone costs by the earlier rows (bench.sweep.forecast: the
    committed reference, the folder's own): `repeats` full-length duets an approach, two runs each. None where an
    approach has no earlier row of its task to price it from."""
    from bench.sweep.forecast import Forecast, earlier_rows

    forecast = Forecast(earlier_rows(specs, ResultStore(out)))
    priced = [forecast.estimate(spec)[0] for spec in specs]
    return None if any(p is None for p in priced) else 2 * repeats * sum(priced)


def tune_paired(specs: list[RunSpec], out: Path, machine: Machine, budget_s: float, repeats: int,
                say: Callable[[str], None], resumed: bool, allow_mixed_revisions: bool, others: list[RunSpec],
                opt_ins: tuple[str, ...], pairing: str) -> list[Tuned]:
    """The race by turns: every setting in duets with its approach's defaults, a duet a round while its interval
    straddles 1 (bench.sweep.race.decision), then the best in full-length duets with the defaults."""
    spent = Spent(out, resumed, allow_mixed_revisions, others)
    searched, confirmed = spent.searched, spent.confirmed

    by_variant = {approach_name(spec): spec for spec in specs}
    raced = {name: candidates(spec, opt_ins) for name, spec in by_variant.items()}
    if (floor := pairing_floor_s(specs, out, repeats)) is not None and floor > budget_s:
        raise BudgetTooSmall(
            f"not tuned: pairing needs at least {repeats} full-length duets with the defaults for each of the "
            f"{len(specs)} approaches, about {floor / 60:.1f} min by the earlier rows, more than the "
            f"{budget_s / 60:g}-minute budget: give --budget {math.ceil(floor / 60 * 1.5)} or more, or fewer "
            f"approaches")
    mode = dict.fromkeys(by_variant, pairing)
    how = ("by turns (two live runs taking turns window by window)" if pairing == TURNS
           else "one after the other (interleaved)")
    say(f"tuning {', '.join(f'{n} ({len(c)} settings)' for n, c in raced.items())} within {budget_s / 60:g} min, "
        f"paired {how}: "
        f"each setting in duets of short runs ({DUET_WINDOWS} windows) with its approach's defaults until its "
        f"interval leaves 1; then each approach's best and its defaults, {repeats} full-length duets")

    def play(name: str, setting: str, index: int, task: TaskSpec, replay: Replay, folder: Path) -> list[ResultRow]:
        spec = by_variant[name]
        pair = tuple(dataclasses.replace(spec, task=task.with_knobs(k)) for k in ("", setting))
        rows = replay.duet(pair, folder, machine, index % 2, mode[name])
        if mode[name] == TURNS and any(map(out_of_memory, rows)):
            mode[name] = INTERLEAVED
            say(f"{name}: two runs do not fit in memory at once, so its pairs run one after the other (interleaved) "
                f"from now on")
            rows = replay.duet(pair, folder, machine, index % 2, INTERLEAVED)
        return rows

    logs = {name: {setting: [] for setting in settings[1:]} for name, settings in raced.items()}
    unfinished = {name: set() for name in by_variant}
    duet_s, full_s = {}, {}

    def race_duet(name: str, setting: str) -> None:
        before = now()
        task = short(by_variant[name].task, DUET_WINDOWS)
        rows = play(name, setting, len(logs[name][setting]), task, searched, out / SEARCH)
        walls = [row.wall_s or 0.0 for row in rows]  # a replayed duet's: its runs' recorded time
        duet_s.setdefault(name, now() - before or (sum(walls) if mode[name] == INTERLEAVED else max(walls)))
        full_s.setdefault(name, full_length_s(rows[0], task, by_variant[name].task))
        if (ratio := duet.log_ratio(*rows)) is None:
            unfinished[name].add(setting)
        else:
            logs[name][setting].append(ratio)

    for name, settings in raced.items():  # each approach's first duet prices its short and full-length duets
        if len(settings) > 1:
            race_duet(name, settings[1])
    reserve = sum(2 * repeats * full_s.get(name, 0.0) for name in by_variant)
    needed = spent() + reserve + sum((race.MIN_DUETS - 1) * s for s in duet_s.values())
    if needed > budget_s:
        raise BudgetTooSmall(
            f"not tuned: pairing needs {race.MIN_DUETS} short duets of a setting and {repeats} full-length duets "
            f"with the defaults for each of the {len(by_variant)} approaches (a short duet up to "
            f"{max(duet_s.values(), default=0):.0f} s here, a full-length run up to "
            f"{max(full_s.values(), default=0):.0f} s), {needed / 60:.1f} min in all, more than the "
            f"{budget_s / 60:g}-minute budget: give --budget {math.ceil(needed / 60 * 1.25)} or more (with --resume "
            f"the runs made count), or fewer approaches")
    say(f"priced here: a short duet up to {max(duet_s.values(), default=0):.0f} s, a full-length run up to "
        f"{max(full_s.values(), default=0):.0f} s; the confirmation keeps back {reserve / 60:.1f} min, "
        f"{max(0.0, budget_s - spent() - reserve) / 60:.1f} min are left to race")

    def still_open() -> list[tuple[str, str]]:
        return [(name, setting) for name, settings in logs.items() for setting, values in settings.items()
                if setting not in unfinished[name] and race.decision(values) == race.OPEN
                and len(values) < MAX_DUETS]

    while entries := still_open():  # one round: a duet for every setting still straddling 1
        ran = False
        for name, setting in entries:
            if spent() + duet_s[name] <= budget_s - reserve:
                race_duet(name, setting)
                ran = True
        if not ran:
            break
    finished = {name: {k: v for k, v in settings.items() if k not in unfinished[name]}
                for name, settings in logs.items()}
    best = {name: race.pick(settings) for name, settings in finished.items()}
    rows_by = {name: ([], []) for name in by_variant}
    paired_logs = {name: [] for name in by_variant}
    for index in range(repeats):  # the confirmation, round-robin over the approaches
        for name, spec in by_variant.items():
            if best[name]:
                rows = play(name, best[name], index, spec.task, confirmed, out)
                if (ratio := duet.log_ratio(*rows)) is not None:
                    paired_logs[name].append(ratio)
            else:  # the defaults kept: their runs alone
                rows = confirmed.run([dataclasses.replace(spec, task=spec.task.with_knobs(""))], out, machine)
            for runs, row in zip(rows_by[name], rows):
                if row.status == Status.OK and row.throughput:
                    runs.append(row.throughput["median"])
    found = []
    for name in by_variant:
        defaults, bests = rows_by[name]
        standing = {k: race.decision(v) for k, v in finished[name].items()}
        found.append(Tuned(name, best[name], len(raced[name]),
                           1 + sum(bool(v) or k in unfinished[name] for k, v in logs[name].items()),
                           defaults, bests if best[name] else defaults, len(unfinished[name]), mode[name],
                           paired_logs[name], standing))
    return found


def tune_and_say(specs: list[RunSpec], out: Path, machine: Machine, budget_min: float, repeats: int,
                 resumed: bool = False, allow_mixed_revisions: bool = False,
                 others: list[RunSpec] = (), opt_ins: tuple[str, ...] = (), pairing: str = TURNS) -> list[Tuned]:
    """`tune` within `budget_min` minutes, then what it found and the time it took, printed."""
    started = now()
    found = tune(specs, out, machine, 60 * budget_min, repeats, resumed=resumed,
                 allow_mixed_revisions=allow_mixed_revisions, others=others, opt_ins=opt_ins, pairing=pairing)
    print(summary(found, now() - started, 60 * budget_min))
    return found


def summary(found: list[Tuned], spent_s: float, budget_s: float) -> str:
    lines = [f"tuned in {spent_s / 60:.1f} min of a {budget_s / 60:g}-minute budget:"]
    for t in found:
        gain = f"{t.gain:.2f}x its defaults" if t.gain is not None else "not measured"
        best = t.best or "its defaults"
        lines.append(f"  {t.variant}: best {best} ({gain}, {len(t.best_runs)} and {len(t.default_runs)} full runs; "
                     f"{t.settings_raced} of its {t.settings} settings raced in the budget"
                     + (f", {t.settings_unfinished} of them unfinished: did not fit or failed" if t.settings_unfinished
                        else "") + ")" + paired(t))
    return "\n".join(lines)


def paired(t: Tuned) -> str:
    """How its runs were paired, the confirmation's paired interval, and what the race found of each setting."""
    if t.pairing == "none":
        return ""
    interval = f", ratio {t.interval[0]:.3f}..{t.interval[1]:.3f}" if t.interval else ""
    found = {standing: [k for k, v in t.standing.items() if v == standing]
             for standing in (race.GAINS, race.COSTS, race.NULL, race.OPEN)}
    told = "; ".join(f"{standing}: {', '.join(settings)}" for standing, settings in found.items() if settings)
    return f"; paired by {t.pairing}{interval}" + (f"; {told}" if told else "")
