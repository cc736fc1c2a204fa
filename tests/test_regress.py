"""The regression check's verdicts on fixed numbers, its exit codes, and the worktree A/B path."""
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import REPO_ROOT
from bench.regress import compare as regress
from bench.regress import duets as ab
from bench.worker.turns import DUET_NOTE
from helpers import bench, cli, result_row

TASK = {"name": "quick", "precision": "fp32", "global_batch": 64}


def run(median, accuracy=0.9, status="ok", task=TASK, spread=0.02, startup=4.0):
    return result_row(run_id="r", status=status, task=dict(task), startup_s=startup, test_accuracy=accuracy,
                      throughput={"median": median, "ci_low": median * (1 - spread), "ci_high": median * (1 + spread)},
                      step_time_ms={"median": 64000 / median, "p90": 70000 / median},
                      environment={"cpu_model": "x", "cores_available": 2})


def verdict(verdicts, metric):
    return next(v for v in verdicts if v.metric == metric).verdict


def test_clear_regression_over_repeats():
    code, verdicts = regress.compare([run(m) for m in (1000, 1010, 990, 1005, 995)],
                                     [run(m) for m in (800, 810, 790, 805, 795)])
    assert code == regress.REGRESSION
    assert verdict(verdicts, "throughput") == "regression" and verdict(verdicts, "step_time_ms") == "regression"


def test_noise_is_not_a_regression():
    # Medians 7 % apart but the runs interleave: not significant.
    code, verdicts = regress.compare([run(m) for m in (1000, 900, 1100, 950, 1050)],
                                     [run(m) for m in (930, 840, 1020, 880, 1000)])
    assert code == regress.OK and verdict(verdicts, "throughput") in ("noise", "no change")


def test_small_significant_change_below_threshold_passes():
    code, verdicts = regress.compare([run(m) for m in (1000, 1001, 1002)], [run(m) for m in (980, 981, 982)])
    assert code == regress.OK and verdict(verdicts, "throughput") == "no change"


def test_improvement_is_reported_and_passes():
    code, verdicts = regress.compare([run(m) for m in (1000, 1001, 1002)], [run(m) for m in (1200, 1201, 1202)])
    assert code == regress.OK and verdict(verdicts, "throughput") == "improvement"


def test_single_runs_use_non_overlapping_intervals():
    code, _ = regress.compare([run(1000)], [run(800)])
    assert code == regress.REGRESSION
    code, verdicts = regress.compare([run(1000, spread=0.2)], [run(900, spread=0.2)])
    assert code == regress.OK and verdict(verdicts, "throughput") == "noise"


def test_accuracy_drop_beyond_tolerance_fails():
    code, verdicts = regress.compare([run(1000, accuracy=0.90)] * 3, [run(1000, accuracy=0.85)] * 3)
    assert code == regress.REGRESSION and verdict(verdicts, "test_accuracy") == "regression"


def test_missing_rows_and_mismatched_tasks_cannot_be_compared():
    assert regress.compare([run(1000)], [])[0] == regress.CANNOT_COMPARE
    # Another global batch is another configuration (run key): each side's is missing on the other.
    code, verdicts = regress.compare([run(1000)], [run(1000, task=dict(TASK, global_batch=128))])
    assert code == regress.CANNOT_COMPARE and [v.verdict for v in verdicts] == ["missing", "missing"]
    # The same configuration trained with another setting the key leaves out: not comparable.
    code, verdicts = regress.compare([run(1000)], [run(1000, task=dict(TASK, epochs=5))])
    assert code == regress.CANNOT_COMPARE and verdicts[0].verdict == "mismatch"
    # A task field an older revision did not record counts at its default (--against origin/main).
    code, _ = regress.compare([run(1000)], [run(1000, task=dict(TASK, input="memory", compile=False))])
    assert code == regress.OK


def test_a_failed_current_run_is_a_regression():
    assert regress.compare([run(1000)], [run(1, status="failed")])[0] == regress.REGRESSION


def duet(ratio, speed, jitter=0.005):
    """One duet's two runs: the machine's speed drifts window by window (`speed`), both runs see it,
    the current run's windows are `ratio` times the baseline's up to a small jitter."""
    base = [1000 * s for s in speed]
    cur = [w * ratio * (1 + jitter * (-1) ** i) for i, w in enumerate(base)]
    rows = []
    for windows in (base, cur):
        row = run(statistics.median(windows))
        row.throughput["windows"] = windows
        rows.append(row)
    return rows


# The machine's speed over 20 windows of five duets, as on a busy 2-core box: each duet at its own
# level (±40 %), wandering ±10 % within it.
DRIFTS = [[level * (1 + 0.1 * math.sin(k + i / 3)) for i in range(20)]
          for k, level in enumerate((0.6, 1.4, 0.8, 1.2, 1.0))]


def duets(ratio, drifts=DRIFTS, jitter=0.005):
    pairs = [duet(ratio, d, jitter) for d in drifts]
    return [a for a, _ in pairs], [b for _, b in pairs]


def test_duets_see_a_regression_through_the_drift():
    base, cur = duets(0.9)
    code, verdicts = regress.compare(base, cur, alpha=0.01, duets=True)
    assert code == regress.REGRESSION and verdict(verdicts, "throughput") == "regression"
    assert next(v for v in verdicts if v.metric == "throughput").ratio == pytest.approx(0.9, abs=0.005)
    # The same runs judged as unpaired samples: the drift drowns the 10 %.
    assert regress.compare(base, cur, alpha=0.01)[0] == regress.OK


def test_duets_of_one_tree_are_not_a_regression():
    base, cur = duets(1.0, jitter=0.02)
    code, verdicts = regress.compare(base, cur, alpha=0.01, duets=True)
    assert code == regress.OK and verdict(verdicts, "throughput") == "no change"
    assert next(v for v in verdicts if v.metric == "throughput").test == "paired t (5 duets)"


def test_duets_report_an_improvement_and_a_small_change_passes():
    assert verdict(regress.compare(*duets(1.2), duets=True)[1], "throughput") == "improvement"
    code, verdicts = regress.compare(*duets(0.97), duets=True)
    assert code == regress.OK and verdict(verdicts, "throughput") == "no change"


def test_duets_whose_ratios_disagree_are_noise():
    # Two duets say 20 % slower, three say 5 % faster: the mean ratio (0.94) is past the threshold,
    # but the duets disagree too much for it to be significant.
    pairs = [duet(r, d) for r, d in zip((0.8, 0.8, 1.05, 1.05, 1.05), DRIFTS)]
    code, verdicts = regress.compare([a for a, _ in pairs], [b for _, b in pairs], alpha=0.01, duets=True)
    assert code == regress.OK and verdict(verdicts, "throughput") == "noise"


def test_one_duet_has_no_test():
    code, verdicts = regress.compare(*duets(0.5, DRIFTS[:1]), duets=True)
    v = next(v for v in verdicts if v.metric == "throughput")
    assert code == regress.OK and v.test == "one duet: no test" and v.verdict == "noise"


def samples_with_t(t: float, n: int) -> list[float]:
    """n values whose one-sample t statistic (mean / (sd / sqrt n)) is exactly t."""
    spread = [(-1) ** i * (1 if i < n - n % 2 else 0) for i in range(n)]  # mean 0, sd > 0
    sd = statistics.stdev(spread)
    return [v + t * sd / math.sqrt(n) for v in spread]


def test_student_t_p_values():
    # The t table's critical values: P(T >= t) for 4 and 1 degrees of freedom.
    assert 1 - regress.duet_p_value(samples_with_t(2.776445, 5)) == pytest.approx(0.025, abs=1e-6)
    assert regress.duet_p_value(samples_with_t(-3.746947, 5)) == pytest.approx(0.01, abs=1e-6)
    assert 1 - regress.duet_p_value(samples_with_t(63.65674, 2)) == pytest.approx(0.005, abs=1e-6)
    assert regress.duet_p_value(samples_with_t(0.0, 4)) == pytest.approx(0.5)
    assert regress.duet_p_value([-0.1, -0.1, -0.1]) == 0.0  # no spread at all: certain


def test_mann_whitney_exact_p_values():
    assert regress.mann_whitney_p([3, 4, 5], [0, 1, 2], current_worse_when_lower=True) == pytest.approx(1 / 20)
    assert regress.mann_whitney_p([0, 1, 2], [3, 4, 5], current_worse_when_lower=True) == 1.0
    # Ties count one half, over every split: U = 0.5 here, reached or beaten by 2 of the 20 splits.
    assert regress.mann_whitney_p([2, 3, 4], [0, 1, 2], current_worse_when_lower=True) == pytest.approx(2 / 20)


def test_slowed_scales_throughput_and_step_time():
    [slow] = regress.slowed([run(1000)], 0.2)
    assert slow.throughput["median"] == pytest.approx(800)
    assert slow.step_time_ms["median"] == pytest.approx(64 / 0.8)


def test_cli_files_exit_codes_and_json(tmp_path):
    base, cur = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    # Five runs a side: with three, no ordering can reach the CLI's default alpha of 0.01 (min p = 1/20).
    base.write_text("".join(json.dumps(run(m).to_dict()) + "\n" for m in (1000, 1010, 990, 1005, 995)))
    cur.write_text("".join(json.dumps(run(m).to_dict()) + "\n" for m in (700, 710, 690, 705, 695)))
    result = cli("regress", "--baseline", str(base), "--current", str(cur), "--out", str(tmp_path / "v"))
    assert result.returncode == 1 and "REGRESSION" in result.stdout
    data = json.loads((tmp_path / "v" / "verdict.json").read_text())
    assert data["exit_code"] == 1 and data["regression"] is True
    check_ci_formats(tmp_path / "v", regressed=True)
    same = cli("regress", "--baseline", str(base), "--current", str(base), "--out", str(tmp_path / "w"))
    assert same.returncode == 0
    missing = cli("regress", "--baseline", str(base), "--current", str(tmp_path / "none.jsonl"),
                  "--out", str(tmp_path / "x"))
    assert missing.returncode == 2


def test_stored_duets_are_judged_again_as_duets_only_when_asked_and_true(tmp_path):
    base, cur = duets(0.9)
    for row in base + cur:
        row.notes.append(DUET_NOTE)
    files = {}
    for name, rows in (("baseline", base), ("current", cur)):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    args = ("regress", "--baseline", str(files["baseline"]), "--current", str(files["current"]))
    paired = cli(*args, "--duets", "--out", str(tmp_path / "p"))
    assert paired.returncode == 1 and "paired t (5 duets)" in paired.stdout
    # Unpaired, the duets' different machine speeds hide the 10 %.
    assert cli(*args, "--out", str(tmp_path / "u")).returncode == 0
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps(run(m).to_dict()) + "\n" for m in (1000, 990, 1010, 1005, 995)))
    refused = cli("regress", "--baseline", str(plain), "--current", str(files["current"]), "--duets",
                  "--out", str(tmp_path / "r"))
    assert refused.returncode == 2 and "drop --duets" in refused.stderr


def test_cross_machine_comparison_warns(tmp_path):
    base, cur = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    base.write_text(json.dumps(run(1000).to_dict()) + "\n")
    other = run(1000)
    other.environment = {"cpu_model": "another CPU", "cores_available": 64}
    cur.write_text(json.dumps(other.to_dict()) + "\n")
    result = cli("regress", "--baseline", str(base), "--current", str(cur), "--out", str(tmp_path / "v"))
    assert "WARNING: the baseline comes from another machine" in result.stderr


@pytest.mark.slow
def test_the_example_workflow_gates_on_ab_against_a_revision_end_to_end(tmp_path):
    """examples/ci/regress.yml's `dtbench` steps as its runner runs them (bash, the step's env), here against HEAD
    with 2 duets of a shorter run: the same code on both sides passes, and the CI pages' files are written."""
    import os
    import sys

    import yaml

    workflow = yaml.safe_load((REPO_ROOT / "examples" / "ci" / "regress.yml").read_text())
    steps = [step for step in workflow["jobs"]["regress"]["steps"] if step.get("run", "").startswith("dtbench ")]
    assert steps
    here = {"BASE": "HEAD", "REPEATS": "2", "RUN_ARGS": "--windows 5", "OUT": str(tmp_path / "ab"),
            "CUDA_VISIBLE_DEVICES": "", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for step in steps:  # in the checkout, as a runner's steps run
        result = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=REPO_ROOT, capture_output=True, text=True,
                                env={**os.environ, **step.get("env", {}), **here}, timeout=560)
        assert result.returncode == 0, result.stdout + result.stderr  # the same code on both sides
    check_ci_formats(tmp_path / "ab", regressed=False)
    data = json.loads((tmp_path / "ab" / "verdict.json").read_text())
    assert data["duets"] is True
    assert {v["metric"] for v in data["verdicts"]} >= {"throughput", "step_time_ms", "test_accuracy"}
    assert all(v["test"] == "paired t (2 duets)" for v in data["verdicts"] if v["metric"] == "throughput")
    for side in ("baseline", "current"):
        rows = regress.load(tmp_path / "ab" / side)
        assert len(rows) == 2 and all(any("taking turns" in n for n in r.notes) for r in rows)


def test_a_revision_older_than_turn_taking_falls_back_to_runs_in_turn():
    added = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "bench/turns.py"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    with ab.worktree(f"{added[-1]}^") as older:
        assert not ab.supports_turns(older)
    with ab.worktree("HEAD") as current:
        assert ab.supports_turns(current)


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting for whoever adopted it to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("death", ["SIGTERM", "SIGKILL"])
def test_a_comparison_that_dies_stops_the_runs_it_started(tmp_path, death):
    # Each side's `bench run` stands in as a script that says when it is told to stop. Killed outright, the
    # comparison cannot stop them itself: the kernel's parent-death signal does, as a SIGTERM they record.
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\ntrap 'kill $!; echo stopped > \"$0.$$\"; exit 143' TERM\necho $$ > \"$0.$$.started\"\n"
                      "sleep 300 & wait\n")
    python.chmod(0o755)
    code = ("import sys; from pathlib import Path; from bench.regress import duets; from bench.interrupt import "
            "stop_on_signals; stop_on_signals(); t = Path(sys.argv[1]); "
            "duets.duets({'baseline': (str(t / 'python'), t), 'current': (str(t / 'python'), t)}, [['--task', 'quick']], "
            "1, t / 'ab')")
    comparison = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO_ROOT)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("python.*.started"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(list(tmp_path.glob("python.*.started"))) == 2
    comparison.send_signal(getattr(signal, death))
    comparison.wait(timeout=60)
    pids = [int(f.read_text()) for f in tmp_path.glob("python.*.started")]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("python.[0-9]*[0-9]"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(f.read_text().strip() for f in tmp_path.glob("python.[0-9]*[0-9]")) == ["stopped", "stopped"]
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:  # each writes, then exits
        time.sleep(0.1)
    assert not [pid for pid in pids if running(pid)]


@pytest.mark.slow
def test_calibrate_measures_the_check_on_duets_of_one_tree(tmp_path):
    result = bench("regress", "--calibrate", "--groups", "1", "--repeats", "2", "--run-args", "--windows 5",
                   "--out", str(tmp_path / "cal"), env={"CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((tmp_path / "cal" / "calibration.json").read_text())
    assert summary["comparisons"] == 1 and summary["duets_per_comparison"] == 2
    assert summary["false_alarm_rate"] == 0.0  # one tree against itself
    assert 0 <= summary["detected_20pct"] <= 1 and summary["duet_ratio_sd"] >= 0
    assert "A/A false alarms" in result.stdout


def test_unknown_revision_is_a_clear_error(tmp_path):
    result = cli("regress", "--against", "no-such-rev", "--out", str(tmp_path / "ab"))
    assert result.returncode == 2 and "cannot check out 'no-such-rev'" in result.stderr


def check_ci_formats(folder, regressed: bool) -> None:
    """github-action-benchmark's custom formats (a list of {name, unit, value, range?, extra?}: value a number)
    and JUnit XML (testsuites > testsuite > testcase, counts that add up, a failure per regression)."""
    import xml.etree.ElementTree as ET

    for name, metrics in (("benchmark-bigger-is-better.json", {"throughput", "test_accuracy"}),
                          ("benchmark-smaller-is-better.json", {"step_time_ms", "startup_s"})):
        entries = json.loads((folder / name).read_text())
        assert entries and {e["name"].rsplit(" ", 1)[1] for e in entries} == metrics
        for entry in entries:
            assert set(entry) <= {"name", "unit", "value", "range", "extra"} and {"name", "unit", "value"} <= set(entry)
            assert isinstance(entry["value"], (int, float)) and all(isinstance(entry[k], str) for k in entry if k != "value")
    root = ET.parse(folder / "junit.xml").getroot()
    [suite] = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert root.tag == "testsuites" and int(suite.get("tests")) == len(cases) == 4  # 3 speed figures and accuracy
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures")) == len(failed) and int(suite.get("skipped")) == 0
    assert bool(failed) == regressed and all(c.get("classname") and c.get("name") for c in cases)
    if regressed:
        assert {c.get("name") for c in failed} >= {"throughput"}


def test_a_relative_out_reaches_each_sides_run_as_an_absolute_folder(tmp_path, monkeypatch):
    """Each side's run starts in its own tree: `--out results/latest/regress` (the default, and examples/ci's
    OUT=regress) must not land in the baseline's temporary worktree, deleted with it."""
    started = []
    monkeypatch.setattr(ab.subprocess, "Popen", lambda argv, **kw: started.append((argv, kw["cwd"])))
    monkeypatch.chdir(tmp_path)
    ab.start_run("python", tmp_path / "elsewhere", ["--variant", "torch-ddp"], Path("regress") / "baseline", {})
    [(argv, cwd)] = started
    assert argv[argv.index("--out") + 1] == str(tmp_path / "regress" / "baseline") and cwd == tmp_path / "elsewhere"
