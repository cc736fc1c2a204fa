"""`bench history`: change points over commits in folders as CI keeps them and in github-action-benchmark's
data.js; a planted step named at its commit, none where there is none, a change of machine split and not flagged,
bad input one line and exit 2, the floor from a calibration, and the page in Chromium."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.history import command, detect, floor, series
from bench.regress.compare import Verdict, write_verdict
from helpers import REPO, cli, result_row

TASK = {"name": "quick", "precision": "fp32", "global_batch": 64, "epochs": 20}
EPYC = {"cpu_model": "AMD EPYC", "cores_available": 2}
XEON = {"cpu_model": "Intel Xeon", "cores_available": 2}


def sha(i: int) -> str:
    return f"{i:04x}" + "ab" * 18  # not this repository's: ordered by when each ran


def commit_folder(root: Path, i: int, throughput: float, environment=EPYC, task=TASK, runs: int = 2,
                  duet: float | None = None) -> None:
    """One CI run's folder, as `bench regress --against` leaves it: current/results.jsonl (and its verdict)."""
    store = root / f"{i:03d}" / "current"
    store.mkdir(parents=True)
    label = ""
    with open(store / "results.jsonl", "w") as out:
        for r in range(runs):
            value = throughput * (1 + 0.002 * (r - 0.5))
            row = result_row(run_id=f"{i}-{r}", started_at=f"2026-12-01T{i // 60:02d}:{i % 60:02d}:{r:02d}+00:00",
                             git_sha=sha(i), task=dict(task), environment=dict(environment), startup_s=4.0,
                             test_accuracy=0.9, throughput={"median": value, "ci_low": value, "ci_high": value},
                             step_time_ms={"median": 64000 / value, "p90": 64000 / value})
            out.write(json.dumps(row.to_dict()) + "\n")
            label = row.key.label
    if duet is not None:
        write_verdict(root / f"{i:03d}" / "verdict.json", 0, [Verdict(
            label, "throughput", 1.0, duet, duet, f"ratio {duet - 0.01:.3f}..{duet + 0.01:.3f}", "paired t", 0.5,
            "no change")], {"duets": True})


def noisy(n: int, step_at: int | None = None, step: float = 0.0, sd: float = 0.01, seed: int = 0) -> list[float]:
    rng = np.random.default_rng(seed)
    return [10_000 * (1 - (step if step_at is not None and i >= step_at else 0)) * math.exp(rng.normal(0, sd))
            for i in range(n)]


def history_of(tmp_path: Path, values: list[float], **kwargs) -> Path:
    root = tmp_path / "history"
    for i, v in enumerate(values):
        commit_folder(root, i, v, **kwargs)
    return root


def run_history(root: Path, tmp_path: Path, *args: str):
    result = cli("history", str(root), "--out", str(tmp_path / "page"), *args)
    data = json.loads((tmp_path / "page" / "history.json").read_text()) if result.returncode != 2 else None
    return result, data


def test_a_planted_step_is_named_at_its_commit(tmp_path):
    result, data = run_history(history_of(tmp_path, noisy(30, step_at=17, step=0.10)), tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr  # the newest change is a 10 % slowdown
    throughput = [c for c in data["change_points"] if c["metric"] == "throughput"]
    assert [c["commit"] for c in throughput] == [sha(17)] and throughput[0]["previous"] == sha(16)
    change = throughput[0]
    assert change["verdict"] == "regression" and change["newest"] and change["p_value"] <= 0.001
    assert 0.87 < change["ratio"] < 0.93 and change["low"] < change["ratio"] < change["high"]
    assert {c["metric"] for c in data["change_points"]} == {"throughput", "step_time_ms"}  # step time rose with it
    assert f"REGRESSION at {sha(17)[:10]}" in result.stdout and "(exit 1)" in result.stdout


def test_a_series_without_a_step_names_none(tmp_path):
    result, data = run_history(history_of(tmp_path, noisy(30, seed=3)), tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert data["change_points"] == [] and "no change point" in result.stdout


def test_an_improvement_or_a_step_within_the_threshold_passes(tmp_path):
    values = noisy(30, step_at=10, step=-0.15, seed=1)
    result, data = run_history(history_of(tmp_path, values), tmp_path)
    assert result.returncode == 0 and [c["verdict"] for c in data["change_points"] if c["metric"] == "throughput"] \
        == ["improvement"]
    shutil.rmtree(tmp_path / "history")
    result, data = run_history(history_of(tmp_path, noisy(30, step_at=10, step=0.03, sd=0.002, seed=1)), tmp_path)
    assert result.returncode == 0 and {c["verdict"] for c in data["change_points"]} == {"change"}


def test_a_change_of_machine_halfway_splits_the_series_and_is_not_flagged(tmp_path):
    root = tmp_path / "history"
    for i, v in enumerate(noisy(30, seed=5)):  # the second machine is 40 % slower: the same code
        commit_folder(root, i, v * (0.6 if i >= 15 else 1), environment=XEON if i >= 15 else EPYC)
    result, data = run_history(root, tmp_path)
    assert result.returncode == 0, result.stdout
    assert data["change_points"] == []
    assert "2 machines" in result.stdout
    assert {fl["machine"] for fl in data["floors"]} == {"AMD EPYC (2 cores)", "Intel Xeon (2 cores)"}


def test_only_the_newest_machine_gates(tmp_path):
    root = tmp_path / "history"
    values = noisy(40, step_at=10, step=0.2, seed=2)
    for i, v in enumerate(values):
        commit_folder(root, i, v if i < 25 else 9000 * v / values[i], environment=XEON if i >= 25 else EPYC)
    result, data = run_history(root, tmp_path)
    flagged = [c for c in data["change_points"] if c["metric"] == "throughput"]
    assert [c["commit"] for c in flagged] == [sha(10)] and not flagged[0]["newest"]
    assert result.returncode == 0


@pytest.mark.parametrize("make, message", [
    (lambda root: root.mkdir(), "no finished rows"),
    (lambda root: commit_folder(root, 0, 1000.0), "one commit"),
    (lambda root: [commit_folder(root, i, 1000.0, task={**TASK, "epochs": 20 if i < 3 else 5}) for i in range(6)],
     "rows from mixed tasks (epochs 20"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, make, message):
    make(tmp_path / "history")
    result = cli("history", str(tmp_path / "history"), "--out", str(tmp_path / "page"))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.strip().count("\n") == 0
    assert not (tmp_path / "page").exists()
    missing = cli("history", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "page"))
    assert missing.returncode == 2 and "no such file or folder" in missing.stderr


def benchmark_action_file(path: Path, values: list[float], machine: str | None = "AMD EPYC (2 cores)") -> None:
    runs = [{"commit": {"id": sha(i), "timestamp": f"2026-12-01T00:{i:02d}:00Z"}, "date": 1_700_000_000_000 + i,
             "tool": "customBiggerIsBetter",
             "benches": [{"name": "torch-ddp 1x1 cpu quick/fp32 batch 64 (weak) throughput", "value": v,
                          "unit": "samples/s", "extra": "no change; baseline 1; paired t (5 duets)"
                          + (f"; machine {machine}" if machine else "")}]} for i, v in enumerate(values)]
    path.write_text("window.BENCHMARK_DATA = " + json.dumps({"lastUpdate": 1, "entries": {"Benchmark": runs}}))


def test_github_action_benchmarks_history_file_is_read(tmp_path):
    data_js = tmp_path / "data.js"
    benchmark_action_file(data_js, noisy(24, step_at=12, step=0.2, seed=4))
    result, data = run_history(data_js, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert [c["commit"] for c in data["change_points"]] == [sha(12)]
    assert data["change_points"][0]["machine"] == "AMD EPYC (2 cores)"
    benchmark_action_file(data_js, noisy(24, seed=4), machine=None)
    result, data = run_history(data_js, tmp_path)
    assert result.returncode == 0 and data["floors"][0]["machine"] == "Benchmark"  # the suite names the runner
    data_js.write_text("window.BENCHMARK_DATA = {\"entries\": {}}")
    assert cli("history", str(data_js), "--out", str(tmp_path / "p")).returncode == 2


def test_regress_names_the_machine_in_github_action_benchmarks_extra(tmp_path):
    from bench.regress import ci_formats

    verdict = Verdict("k", "throughput", 1000.0, 990.0, 0.99, "-", "paired t", 0.4, "no change")
    ci_formats.write(tmp_path, [verdict], {"throughput": series.ALL_METRICS["throughput"]}, "AMD EPYC (2 cores)")
    [entry] = json.loads((tmp_path / ci_formats.BIGGER).read_text())
    assert entry["extra"].endswith("; machine AMD EPYC (2 cores)")


def test_commits_this_repository_knows_are_ordered_by_git_not_by_when_they_ran():
    import subprocess

    shas = subprocess.run(["git", "rev-list", "--first-parent", "--max-count=3", "HEAD"], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout.split()  # a line of commits: merges' other parents aside
    ran = {shas[0]: "1", shas[1]: "3", shas[2]: "2"}  # run out of order: the newest first
    assert series._commit_order(list(ran), ran) == shas[::-1]


def test_the_duets_of_an_against_run_come_with_their_commit(tmp_path):
    root = tmp_path / "history"
    for i, v in enumerate(noisy(8, seed=6)):
        commit_folder(root, i, v, duet=0.98 if i == 5 else 1.0)
    history = series.read(root)
    throughput = next(s for s in history.series if s.metric.name == "throughput")
    assert throughput.points[5].duet_ratio == 0.98 and throughput.points[5].duet_range == (0.97, 0.99)


def test_the_floor_from_the_committed_calibration_and_from_a_history():
    floors = {f.metric: f for f in floor.from_calibration(REPO / "results" / "regress-calibration-cpu2", 5, 0.01)}
    # The calibration's duets' ratios had a 1.0 % sd: 5 duets see about 2 %.
    assert 0.005 < floors["throughput"].sigma < 0.02 and 0.01 < floors["throughput"].smallest < 0.04
    assert floors["throughput"].samples == 50 and floors["throughput"].machine == "AMD EPYC (2 cores)"
    assert floor.history_floor(0.01, 5, 0.001) > floor.history_floor(0.01, 20, 0.001)
    # The floor is what the detector does: a step of the floor's size is found about 80 % of the time.
    size = floor.history_floor(0.05, 5, 0.001)
    found = sum(any(c.index == 5 for c in detect.change_points(noisy(10, step_at=5, step=size, sd=0.05, seed=s)))
                for s in range(100))
    assert 55 <= found <= 95, found


def test_the_detector_keeps_only_significant_changes():
    assert detect.change_points([1000.0] * 10) == []
    assert [c.index for c in detect.change_points([1000.0] * 5 + [900.0] * 5)] == [5]
    assert detect.change_points([1000.0, 900.0, 1000.0]) == []  # too short for a test on each side
    two = detect.change_points(noisy(60, seed=8)[:20] + [v * 0.8 for v in noisy(60, seed=9)[20:40]]
                               + noisy(60, seed=10)[40:])
    big = [c for c in two if abs(math.log(c.ratio)) > 0.05]  # chance shifts of a few % may pass p 0.001 too
    assert [c.index for c in big] == [20, 40] and big[0].ratio < 0.85 < 1.15 < big[1].ratio


def test_the_page_holds_its_pngs_and_a_row_a_change_point_with_its_duets(tmp_path):
    root = tmp_path / "history"
    for i, v in enumerate(noisy(30, step_at=17, step=0.10)):
        commit_folder(root, i, v, duet=0.9 if i == 17 else None)
    result = cli("history", str(root), "--out", str(tmp_path / "page"))
    assert "its A/B against the commit before: x0.900 (0.890..0.910)" in result.stdout
    page = (tmp_path / "page" / "history.html").read_text()
    assert "×0.900 (0.890–0.910)" in page
    pngs = list((tmp_path / "page").glob("*.png"))
    assert len(pngs) == 1 and page.count('src="data:image/png;base64,') == 1
    assert page.count('<tr class="regression">') == 2 and "REGRESSION" in page
    assert "The smallest change each runner can see" in page


@pytest.mark.slow
def test_the_page_in_a_browser(tmp_path):
    from test_html_report import ARGS, CHROMIUM, browser_or_skip

    sync_playwright = browser_or_skip()
    root = tmp_path / "history"
    for i, v in enumerate(noisy(30, step_at=12, step=0.10)):
        commit_folder(root, i, v * (0.7 if i >= 22 else 1), environment=XEON if i >= 22 else EPYC,
                      duet=0.9 if i == 12 else 1.0)
    result = cli("history", str(root), "--out", str(tmp_path / "page"), "--calibration",
                 str(REPO / "results" / "regress-calibration-cpu2"))
    assert result.returncode == 0, result.stdout  # the 10 % came in on the first machine; the second has none
    errors = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
            page.on("request", lambda r: errors.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto((tmp_path / "page" / "history.html").as_uri())
            assert page.locator("h1").inner_text() == "dtbench history"
            assert page.locator("table.changes tr.regression").count() == 2
            assert "A/B, 5 duets" in page.locator("table.floors").inner_text()
            image = page.locator("img").first
            assert image.evaluate("i => i.complete && i.naturalWidth > 800")
            page.screenshot(path=str(tmp_path / "history.png"), full_page=True)
        finally:
            browser.close()
    assert errors == []


def test_the_example_workflow_keeps_each_run_and_fails_on_a_new_regression(tmp_path):
    """examples/ci/regress.yml's history job, its steps that need no GitHub (keep this run, read the history) run
    with bash as a runner runs them: a history of 20 runs plus this one passes, and once a slowdown has held for
    a few pushes the step exits 1 naming the commit it came in at."""
    import os
    import subprocess
    import sys

    import yaml

    workflow = yaml.safe_load((REPO / "examples" / "ci" / "regress.yml").read_text())
    steps = {step.get("name"): step for step in workflow["jobs"]["history"]["steps"]}
    keep, read = steps["Keep this run"], steps["Change points over commits"]
    assert workflow["jobs"]["history"]["needs"] == "regress" and "dtbench history history/runs" in read["run"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    runs = tmp_path / "history" / "runs"
    for i, v in enumerate(noisy(26, step_at=20, step=0.2, seed=11)):
        if i < 25:
            commit_folder(runs, i, v)
            continue
        commit_folder(tmp_path / "staging", i, v)  # this push's run, as the regress job's artifact holds it
        (tmp_path / "staging" / f"{i:03d}").rename(tmp_path / "regress")
    codes = {}
    for name, step in (("keep", keep), ("read", read)):
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=tmp_path, capture_output=True, text=True,
                              env={**os.environ, **step.get("env", {}), "GITHUB_SHA": sha(25), "PATH": path})
        codes[name] = done.returncode
        if name == "read":
            assert f"REGRESSION at {sha(20)[:10]}" in done.stdout, done.stdout + done.stderr
    assert codes == {"keep": 0, "read": 1}
    assert len(list(runs.iterdir())) == 26 and (tmp_path / "history-page" / "history.html").exists()
