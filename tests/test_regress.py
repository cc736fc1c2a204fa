"""The regression check's verdicts on fixed numbers, its exit codes, and the worktree A/B path."""
import json

import pytest

from bench import regress
from bench.results import ResultRow
from conftest import bench

TASK = {"name": "quick", "precision": "fp32", "global_batch": 64}


def run(median, accuracy=0.9, status="ok", task=TASK, spread=0.02, startup=4.0):
    return ResultRow(run_id="r", started_at="t", status=status, variant="torch-ddp", framework="torch",
                     launcher="torchrun", device_type="cpu", nodes=1, devices_per_node=1, world_size=1,
                     task=dict(task), startup_s=startup, test_accuracy=accuracy,
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
    other = dict(TASK, global_batch=128)
    code, verdicts = regress.compare([run(1000)], [run(1000, task=other)])
    assert code == regress.CANNOT_COMPARE and verdicts[0].verdict == "mismatch"


def test_a_failed_current_run_is_a_regression():
    assert regress.compare([run(1000)], [run(1, status="failed")])[0] == regress.REGRESSION


def test_mann_whitney_exact_p_values():
    assert regress.mann_whitney_p([3, 4, 5], [0, 1, 2], current_worse_when_lower=True) == pytest.approx(1 / 20)
    assert regress.mann_whitney_p([0, 1, 2], [3, 4, 5], current_worse_when_lower=True) == 1.0


def test_slowed_scales_throughput_and_step_time():
    [slow] = regress.slowed([run(1000)], 0.2)
    assert slow.throughput["median"] == pytest.approx(800)
    assert slow.step_time_ms["median"] == pytest.approx(64 / 0.8)


def test_cli_files_exit_codes_and_json(tmp_path):
    base, cur = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    # Five runs a side: with three, no ordering can reach the CLI's default alpha of 0.01 (min p = 1/20).
    base.write_text("".join(json.dumps(run(m).to_dict()) + "\n" for m in (1000, 1010, 990, 1005, 995)))
    cur.write_text("".join(json.dumps(run(m).to_dict()) + "\n" for m in (700, 710, 690, 705, 695)))
    result = bench("regress", "--baseline", str(base), "--current", str(cur), "--out", str(tmp_path / "v"))
    assert result.returncode == 1 and "REGRESSION" in result.stdout
    data = json.loads((tmp_path / "v" / "verdict.json").read_text())
    assert data["exit_code"] == 1 and data["regression"] is True
    same = bench("regress", "--baseline", str(base), "--current", str(base), "--out", str(tmp_path / "w"))
    assert same.returncode == 0
    missing = bench("regress", "--baseline", str(base), "--current", str(tmp_path / "none.jsonl"),
                    "--out", str(tmp_path / "x"))
    assert missing.returncode == 2


def test_cross_machine_comparison_warns(tmp_path):
    base, cur = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    base.write_text(json.dumps(run(1000).to_dict()) + "\n")
    other = run(1000)
    other.environment = {"cpu_model": "another CPU", "cores_available": 64}
    cur.write_text(json.dumps(other.to_dict()) + "\n")
    result = bench("regress", "--baseline", str(base), "--current", str(cur), "--out", str(tmp_path / "v"))
    assert "WARNING: the baseline comes from another machine" in result.stderr


@pytest.mark.slow
def test_ab_against_a_revision_end_to_end(tmp_path):
    result = bench("regress", "--against", "HEAD", "--repeats", "2", "--run-args", "--windows 5",
                   "--out", str(tmp_path / "ab"), env={"CUDA_VISIBLE_DEVICES": ""}, timeout=600)
    assert result.returncode in (0, 1), result.stderr
    data = json.loads((tmp_path / "ab" / "verdict.json").read_text())
    assert {v["metric"] for v in data["verdicts"]} >= {"throughput", "step_time_ms", "test_accuracy"}
    assert all(v["test"].startswith("Mann-Whitney U (2 vs 2") for v in data["verdicts"] if v["metric"] == "throughput")
    assert len(regress.load(tmp_path / "ab" / "baseline")) == 2 and len(regress.load(tmp_path / "ab" / "current")) == 2


def test_unknown_revision_is_a_clear_error(tmp_path):
    result = bench("regress", "--against", "no-such-rev", "--out", str(tmp_path / "ab"))
    assert result.returncode == 2 and "cannot check out 'no-such-rev'" in result.stderr
