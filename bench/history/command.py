"""`bench history SOURCE`: every series' change points, the floor of each runner, the page, and the exit code: 1
when the newest change point of a configuration's metric on its newest machine is a regression past the threshold,
0 otherwise, 2 when the series cannot be read (the CLI prints the SpecError's one line)."""
from __future__ import annotations

import argparse
import importlib.util
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench import install
from bench.history import MAX_PVALUE
from bench.spec.task import SpecError

if TYPE_CHECKING:
    from bench.history import detect, floor, series

OK, REGRESSION = 0, 1


@dataclass(frozen=True)
class Finding:
    config: str
    metric: str
    machine: str
    commit: str          # the first commit of the new level
    previous: str        # the commit before it
    before: float
    after: float
    ratio: float
    low: float
    high: float
    p_value: float
    verdict: str         # regression | improvement | change (within the threshold)
    newest: bool         # the newest change point of its configuration and metric on the newest machine
    duet_ratio: float | None = None   # where --against ran at that commit: its duets against the commit before,
    duet_range: tuple[float, float] | None = None  # paired, so free of the drift a plain series carries


def verdict_of(metric: "series.Metric", change: "detect.ChangePoint", threshold: float,
               accuracy_tolerance: float) -> str:
    if metric.name == "test_accuracy":  # exact over the test set: an absolute tolerance, as regress has
        drop = change.before - change.after
        return "regression" if drop > accuracy_tolerance else "improvement" if -drop > accuracy_tolerance else "change"
    worse = (1 - change.ratio) if metric.higher_is_better else (change.ratio - 1)
    return "regression" if worse > threshold else "improvement" if -worse > threshold else "change"


@dataclass
class Analysis:
    history: series.History
    changes: dict[str, list[detect.ChangePoint]]    # by series name
    findings: list[Finding]
    floors: list[floor.Floor]
    code: int


def analyse(history: series.History, threshold: float, accuracy_tolerance: float, max_pvalue: float,
            calibrations: list[Path], duets: int, alpha: float) -> Analysis:
    from bench.history import detect, floor

    position = {c: i for i, c in enumerate(history.commits)}
    newest_machine: dict[tuple[str, str], tuple[int, str]] = {}
    for s in history.series:  # the machine of a configuration's newest commit gates; a runner left behind does not
        last = (position[s.points[-1].commit], s.machine)
        newest_machine[(s.config, s.metric.name)] = max(newest_machine.get((s.config, s.metric.name), last), last)
    changes, findings, floors = {}, [], []
    for folder in calibrations:
        floors += floor.from_calibration(folder, duets, alpha)
    for s in history.series:
        found = detect.change_points([p.value for p in s.points], max_pvalue)
        changes[s.name] = found
        for i, change in enumerate(found):
            findings.append(Finding(s.config, s.metric.name, s.machine, s.points[change.index].commit,
                                    s.points[change.index - 1].commit, change.before, change.after, change.ratio,
                                    change.low, change.high, change.p_value,
                                    verdict_of(s.metric, change, threshold, accuracy_tolerance),
                                    i == len(found) - 1 and newest_machine[(s.config, s.metric.name)][1] == s.machine,
                                    s.points[change.index].duet_ratio, s.points[change.index].duet_range))
        seen = floor.from_history(s, found, max_pvalue)
        if seen:
            floors.append(seen)
    code = REGRESSION if any(f.newest and f.verdict == "regression" for f in findings) else OK
    return Analysis(history, changes, findings, floors, code)


def _percent(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f} %"


def _duets(f: Finding) -> str:
    if f.duet_ratio is None:
        return ""
    span = f" ({f.duet_range[0]:.3f}..{f.duet_range[1]:.3f})" if f.duet_range else ""
    return f"; its A/B against the commit before: x{f.duet_ratio:.3f}{span}"


def render(analysis: Analysis, threshold: float) -> str:
    lines = [f"{len(analysis.history.commits)} commits, {len(analysis.history.series)} series "
             f"({len({s.config for s in analysis.history.series})} configurations, "
             f"{len({s.machine for s in analysis.history.series})} machines)"]
    if not analysis.findings:
        lines.append("no change point")
    for f in analysis.findings:
        flag = f.verdict.upper() if f.verdict == "regression" else f.verdict
        lines.append(f"{f.config} {f.metric} on {f.machine}: {flag} at {f.commit[:10]} (after {f.previous[:10]}): "
                     f"{f.before:.4g} -> {f.after:.4g}, {_percent(f.ratio)} [{_percent(f.low)}, {_percent(f.high)}], "
                     f"p {f.p_value:.2g}" + (" (newest)" if f.newest else "") + _duets(f))
    lines.append("smallest change seen 80 % of the time (the gate flags nothing under its threshold "
                 f"{threshold:.0%}):")
    from bench.history.floor import describe

    for fl in sorted(analysis.floors, key=lambda x: (x.machine, x.config, x.metric, x.how)):
        lines.append(f"  {fl.machine}, {fl.config} {fl.metric}: {describe(fl)} by {fl.how} (sd {fl.sigma:.1%} "
                     f"over {fl.samples})")
    return "\n".join(lines)


def cmd_history(args: argparse.Namespace) -> int:
    from bench.history import page, series

    if importlib.util.find_spec("ruptures") is None:
        raise SpecError(f"bench history finds change points with ruptures, which is not installed: "
                        f"{install.hint('history')}")
    history = series.read(args.source)
    calibrations = [Path(c) for c in args.calibration or []]
    analysis = analyse(history, args.threshold, args.accuracy_tolerance, args.max_pvalue, calibrations,
                       args.duets, args.alpha)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "history.json").write_text(json.dumps(
        {"exit_code": analysis.code, "source": str(history.source), "commits": history.commits,
         "threshold": args.threshold, "max_pvalue": args.max_pvalue,
         "change_points": [asdict(f) for f in analysis.findings], "floors": [asdict(f) for f in analysis.floors]},
        indent=1))
    page.write(analysis, out, args.threshold)
    print(render(analysis, args.threshold))
    print(f"\n{['no new regression', 'REGRESSION at the newest change point'][analysis.code]} (exit {analysis.code});"
          f" {out / 'history.html'}, {out / 'history.json'}")
    return analysis.code
