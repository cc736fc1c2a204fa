"""Throughput regression checks that hold on noisy machines.

A change is a regression only when both hold: the metric moved the wrong way by more than a
threshold (default 5 %), and the move is statistically significant. Three cases:
- Duets (A/B mode: the two sides' runs took turns window by window, `bench.worker.turns`): each duet's
  ratio is the median of its paired windows' ratios, free of the machine's drift; the test is a
  one-sided Student t on the duets' log ratios, whose spread is the noise left between processes.
- Several runs a side timed apart (stored files, or a revision older than turn-taking): a one-sided
  exact Mann-Whitney U on the per-run figures. Runs, not windows, are the samples: the windows of
  one run share its luck.
- One run a side: whether the two runs' 95 % intervals over their windows do not overlap.
"""
from __future__ import annotations

import json
import logging
import math
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from scipy import stats

from bench.regress import ci_formats
from bench.results import ResultRow, ResultStore
from bench.results.key import same_settings
from bench.results.jsonl import read_jsonl
from bench.spec.task import SpecError
from bench.status import Status
from bench.worker.turns import DUET_NOTE

log = logging.getLogger(__name__)

OK, REGRESSION, CANNOT_COMPARE = 0, 1, 2


@dataclass(frozen=True)
class Metric:
    name: str
    higher_is_better: bool
    unit: str

    def value(self, row: ResultRow) -> float | None:
        if self.name == "throughput":
            return row.throughput["median"] if row.throughput else None
        if self.name == "step_time_ms":
            return row.step_time_ms["median"] if row.step_time_ms else None
        return getattr(row, self.name)

    def interval(self, row: ResultRow) -> tuple[float, float] | None:
        """The run's own 95 % interval over its windows, where it has one."""
        if self.name == "throughput" and row.throughput and "ci_low" in row.throughput:
            return row.throughput["ci_low"], row.throughput["ci_high"]
        if self.name == "step_time_ms" and row.throughput and "ci_low" in row.throughput and row.step_time_ms:
            # Step time is the global batch over throughput: the same interval, inverted.
            scale = row.step_time_ms["median"] * row.throughput["median"]
            return scale / row.throughput["ci_high"], scale / row.throughput["ci_low"]
        return None


METRICS = (Metric("throughput", True, "samples/s"), Metric("step_time_ms", False, "ms"),
           Metric("startup_s", False, "s"))
ACCURACY = Metric("test_accuracy", True, "")


def mann_whitney_p(baseline: list[float], current: list[float], current_worse_when_lower: bool) -> float:
    """One-sided Mann-Whitney U p-value: the chance, with no real difference, of `current` looking at
    least this much worse. Exact over every split of the pooled runs (ties count one half) up to
    50,000 splits; past that the normal approximation, which is accurate there."""
    exact = math.comb(len(baseline) + len(current), len(current)) <= 50_000
    return float(stats.mannwhitneyu(current, baseline, alternative="less" if current_worse_when_lower else "greater",
                                    method=stats.PermutationMethod(n_resamples=50_000) if exact else "asymptotic").pvalue)


@dataclass
class Verdict:
    key: str
    metric: str
    baseline: float | None
    current: float | None
    ratio: float | None
    interval: str
    test: str
    p_value: float | None
    verdict: str  # regression | improvement | no change | noise | missing | failed | mismatch


def group(rows: list[ResultRow]) -> dict[str, list[ResultRow]]:
    """Runs by configuration (the run key's label), in order."""
    groups: dict[str, list[ResultRow]] = {}
    for r in rows:
        groups.setdefault(r.key.label, []).append(r)
    return groups


def _judge(metric: Metric, base: list[ResultRow], cur: list[ResultRow], threshold: float,
           alpha: float, key: str) -> Verdict:
    """Runs timed one after the other (or two stored files): the two sides' runs as samples."""
    a = [v for v in (metric.value(r) for r in base) if v is not None]
    b = [v for v in (metric.value(r) for r in cur) if v is not None]
    if not a or not b:
        return Verdict(key, metric.name, None, None, None, "-", "-", None, "missing")
    center_a, center_b = statistics.median(a), statistics.median(b)
    ratio = center_b / center_a if center_a else None
    if len(a) >= 2 and len(b) >= 2:
        p = mann_whitney_p(a, b, current_worse_when_lower=metric.higher_is_better)
        p_better = mann_whitney_p(a, b, current_worse_when_lower=not metric.higher_is_better)
        test = f"Mann-Whitney U ({len(a)} vs {len(b)} runs)"
        significant_worse, significant_better = p <= alpha, p_better <= alpha
        interval = f"{min(b):.4g}..{max(b):.4g}"
    else:
        ia, ib = metric.interval(base[-1]), metric.interval(cur[-1])
        p = None
        if ia and ib:
            test = "95% CIs over windows"
            apart = ib[1] < ia[0] or ib[0] > ia[1]
            b_lower = ib[1] < ia[0]
            significant_worse = apart and (b_lower == metric.higher_is_better)
            significant_better = apart and not significant_worse
            interval = f"{ib[0]:.4g}..{ib[1]:.4g}"
        else:
            test, interval = "one run a side: no test", "-"
            significant_worse = significant_better = False
    verdict = _verdict(metric, ratio, threshold, significant_worse, significant_better)
    return Verdict(key, metric.name, center_a, center_b, ratio, interval, test, p, verdict)


def duet_log_ratio(metric: Metric, base: ResultRow, cur: ResultRow) -> float | None:
    """log(current / baseline) for one duet. Throughput and step time come from the paired
    windows (window i of each run was timed within milliseconds of the other), the rest from
    the runs' own figures."""
    wa, wb = (base.throughput or {}).get("windows"), (cur.throughput or {}).get("windows")
    if metric.name in ("throughput", "step_time_ms") and wa and wb and len(wa) == len(wb):
        log_ratio = statistics.median(math.log(y / x) for x, y in zip(wa, wb))
        return log_ratio if metric.name == "throughput" else -log_ratio
    a, b = metric.value(base), metric.value(cur)
    return math.log(b / a) if a and b else None


def _judge_duets(metric: Metric, duets: list[tuple[ResultRow, ResultRow]], threshold: float,
                 alpha: float, key: str) -> Verdict:
    """Duets (runs that took turns): a one-sided one-sample Student t-test on the duets' log
    ratios. Each duet's ratio is free of the machine's drift; their spread is the noise that
    remains between processes, which the test weighs."""
    logs = [v for v in (duet_log_ratio(metric, a, b) for a, b in duets) if v is not None]
    if not logs:
        return Verdict(key, metric.name, None, None, None, "-", "-", None, "missing")
    center_a = _median_or_none([metric.value(a) for a, _ in duets])
    center_b = _median_or_none([metric.value(b) for _, b in duets])
    mean = statistics.mean(logs)
    ratio = math.exp(mean)
    interval = f"ratio {math.exp(min(logs)):.3f}..{math.exp(max(logs)):.3f}"
    if len(logs) < 2:
        verdict = _verdict(metric, ratio, threshold, False, False)
        return Verdict(key, metric.name, center_a, center_b, ratio, interval, "one duet: no test", None, verdict)
    p_lower = duet_p_value(logs)  # P(a mean this far below 1 or further, by chance)
    p_worse, p_better = (p_lower, 1 - p_lower) if metric.higher_is_better else (1 - p_lower, p_lower)
    verdict = _verdict(metric, ratio, threshold, p_worse <= alpha, p_better <= alpha)
    return Verdict(key, metric.name, center_a, center_b, ratio, interval,
                   f"paired t ({len(logs)} duets)", p_worse, verdict)


def duet_p_value(log_ratios: list[float]) -> float:
    """One-sided one-sample Student t: the chance of a mean log ratio this far below 0 or further."""
    mean, spread = statistics.mean(log_ratios), statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    # Identical ratios: t is infinite (or, at a mean of 0, taken as 0).
    t = mean / spread if spread > 0 else math.copysign(math.inf, mean) if mean else 0.0
    return float(stats.t.cdf(t, len(log_ratios) - 1))


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _verdict(metric: Metric, ratio: float | None, threshold: float, significant_worse: bool,
             significant_better: bool) -> str:
    if ratio is None:
        return "no change"
    worse = (1 - ratio) if metric.higher_is_better else (ratio - 1)
    if worse > threshold and significant_worse:
        return "regression"
    if -worse > threshold and significant_better:
        return "improvement"
    if abs(worse) > threshold:
        return "noise"  # large but not significant
    return "no change"


def compare(baseline: list[ResultRow], current: list[ResultRow], threshold: float = 0.05, alpha: float = 0.05,
            accuracy_tolerance: float = 0.01, duets: bool = False) -> tuple[int, list[Verdict]]:
    """Every (variant, topology, task) in either file, judged metric by metric; and the exit code.
    With `duets`, the i-th baseline and current runs of each group took turns with each other."""
    verdicts: list[Verdict] = []
    base_groups, cur_groups = group(baseline), group(current)
    for key in sorted(set(base_groups) | set(cur_groups)):
        base = [r for r in base_groups.get(key, []) if r.status == Status.OK]
        cur_all = cur_groups.get(key, [])
        cur = [r for r in cur_all if r.status == Status.OK]
        if not base or not cur_all:
            verdicts.append(Verdict(key, "all", None, None, None, "-", "-", None, "missing"))
            continue
        if not cur:
            verdicts.append(Verdict(key, "all", None, None, None, "-", "-", None, "failed"))
            continue
        if not all(same_settings(base[0].task, r.task) for r in base + cur):
            verdicts.append(Verdict(key, "all", None, None, None, "-", "-", None, "mismatch"))
            continue
        pairs = [(a, b) for a, b in zip(base_groups[key], cur_all) if a.status == b.status == Status.OK]
        for metric in METRICS:
            verdicts.append(_judge_duets(metric, pairs, threshold, alpha, key) if duets
                            else _judge(metric, base, cur, threshold, alpha, key))
        verdicts.append(_judge_accuracy(base, cur, accuracy_tolerance, key))
    if any(v.verdict in ("regression", "failed") for v in verdicts):
        return REGRESSION, verdicts
    if any(v.verdict in ("missing", "mismatch") for v in verdicts):
        return CANNOT_COMPARE, verdicts
    return OK, verdicts


def _judge_accuracy(base: list[ResultRow], cur: list[ResultRow], tolerance: float, key: str) -> Verdict:
    """Accuracy is exact over the whole test set: a drop beyond the tolerance fails, no test needed."""
    a = [r.test_accuracy for r in base if r.test_accuracy is not None]
    b = [r.test_accuracy for r in cur if r.test_accuracy is not None]
    if not a or not b:
        return Verdict(key, ACCURACY.name, None, None, None, "-", "-", None, "no change")
    center_a, center_b = statistics.median(a), statistics.median(b)
    drop = center_a - center_b
    verdict = "regression" if drop > tolerance else "improvement" if -drop > tolerance else "no change"
    return Verdict(key, ACCURACY.name, center_a, center_b, center_b / center_a, f"{min(b):.4f}..{max(b):.4f}",
                   f"tolerance {tolerance:g} absolute", None, verdict)


def fingerprint(rows: list[ResultRow]) -> dict:
    """What must match for two machines' throughput to be comparable."""
    env = rows[0].environment if rows else {}
    return {"host": rows[0].host if rows else None, "cpu_model": env.get("cpu_model"),
            "cores": env.get("cores_available"), "gpu_model": env.get("gpu_model"),
            "gpu_count": env.get("gpu_count")}


def machine_label(rows: list[ResultRow]) -> str:
    """The hardware the rows ran on, in words; not the host, which an ephemeral CI runner changes every job."""
    fp = fingerprint(rows)
    gpu = f", {fp['gpu_count']}x {fp['gpu_model']}" if fp.get("gpu_model") else ""
    return f"{fp.get('cpu_model') or 'unknown CPU'} ({fp.get('cores') or '?'} cores){gpu}"


def render(verdicts: list[Verdict]) -> str:
    headers = ("run", "metric", "baseline", "current", "ratio", "range or CI", "test", "p", "verdict")
    body = [[v.key, v.metric, _num(v.baseline), _num(v.current), _num(v.ratio, ".3f"), v.interval, v.test,
             _num(v.p_value, ".3f"), v.verdict.upper() if v.verdict == "regression" else v.verdict] for v in verdicts]
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *body)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in [headers, *body])


def _num(value, spec: str = ".4g") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def write_verdict(path: Path, code: int, verdicts: list[Verdict], extra: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"exit_code": code, "regression": code == REGRESSION, **extra,
                                "verdicts": [asdict(v) for v in verdicts]}, indent=1))


def noise(a: list[ResultRow], b: list[ResultRow]) -> dict:
    """How much throughput varies from run to run, and how much a duet's paired ratio varies."""
    medians = [r.throughput["median"] for r in a + b if r.status == Status.OK and r.throughput]
    logs = [duet_log_ratio(METRICS[0], x, y) for x, y in zip(a, b) if x.status == y.status == Status.OK]
    logs = [v for v in logs if v is not None]
    return {"run_to_run_cv": statistics.pstdev(medians) / statistics.mean(medians) if medians else None,
            "duet_ratio_sd": statistics.stdev(logs) if len(logs) >= 2 else None}


def slowed(rows: list[ResultRow], slowdown: float) -> list[ResultRow]:
    """The same runs as if every step had taken 1/(1 - slowdown) as long (calibration only)."""
    out = []
    for r in rows:
        if r.status != Status.OK or not r.throughput:
            out.append(r)
            continue
        keep = 1 - slowdown
        t = {k: (v * keep if k in ("median", "ci_low", "ci_high") else v) for k, v in r.throughput.items()}
        t["windows"] = [w * keep for w in r.throughput.get("windows", [])]
        step = {k: v / keep for k, v in r.step_time_ms.items()} if r.step_time_ms else None
        out.append(replace(r, throughput=t, step_time_ms=step))
    return out


def timed_as_duets(baseline: list[ResultRow], current: list[ResultRow]) -> bool:
    """Both files hold the same number of runs, each timed in a duet (their i-th runs are partners
    when they are the baseline/ and current/ folders of one `--against`)."""
    rows = baseline + current
    return len(baseline) == len(current) > 0 and all(DUET_NOTE in r.notes for r in rows)


def judge(baseline_path: Path, current_path: Path, duets: bool, threshold: float, alpha: float,
          accuracy_tolerance: float, out: Path, check_pairs: bool = True) -> tuple[int, str]:
    """Compare two stores, write OUT/verdict.json; the exit code and the text to print."""
    baseline, current = load(baseline_path), load(current_path)
    if duets and check_pairs and not timed_as_duets(baseline, current):
        raise SpecError("--duets: these files' runs were not timed as partners (the baseline/ and current/ "
                        "folders of one `regress --against` are): drop --duets")
    machines = {"baseline": fingerprint(baseline), "current": fingerprint(current)}
    if baseline and current and machines["baseline"] != machines["current"]:
        log.warning("WARNING: the baseline comes from another machine (%s vs %s): absolute throughput is not "
                    "comparable; prefer --against REV on one machine", machines["baseline"], machines["current"])
    code, verdicts = compare(baseline, current, threshold, alpha, accuracy_tolerance, duets)
    write_verdict(out / "verdict.json", code, verdicts, {"threshold": threshold, "alpha": alpha,
                                                         "duets": duets, "machines": machines})
    ci_formats.write(out, verdicts, {m.name: m for m in (*METRICS, ACCURACY)},
                     machine_label(current) if current else "")
    return code, (f"{render(verdicts)}\n\n{['no regression', 'REGRESSION', 'could not compare'][code]} "
                  f"(exit {code}); verdict in {out / 'verdict.json'} (and for CI pages: {ci_formats.JUNIT}, "
                  f"{ci_formats.BIGGER}, {ci_formats.SMALLER})")


def load(path: Path) -> list[ResultRow]:
    """A results file (any name), or a results directory."""
    if path.is_dir():
        return ResultStore(path).rows()
    if not path.exists():
        return []
    return [ResultRow.from_dict(d) for d in read_jsonl(path)]
