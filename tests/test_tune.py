"""`bench tune` on runs made from their specs (nothing trained; a fake clock that each run advances): the
settings it races, that it keeps to its budget, finds the faster setting, confirms it against the defaults, keeps
its short runs apart and ranks the tuned runs apart from the runs as shipped."""
from __future__ import annotations

import pytest

from bench.results import ResultStore
from bench.results.jsonl import RESULTS
from bench.run.execute import base_row, new_run_id
from bench.spec.task import get_task
from bench.spec.variants import get_variant
from bench.status import Status
from bench.sweep import duet, tune

SPEED = {"bucket_cap_mb=100.0": 1.3, "bucket_cap_mb=1.0": 0.8}
SHORT_S, FULL_S = 10.0, 40.0  # a race's short run (3 windows; a duet's of 7 windows: twice as long), a full one


@pytest.fixture
def fake_time(monkeypatch):
    """Each run takes SHORT_S (a tuning's short run; a duet's, of more windows, twice that) or FULL_S of the fake
    clock; its speed is SPEED's."""
    from bench.sweep import runner

    now = [0.0]

    def execute(spec, out_dir, machine, data_path, environment=None, store=None):
        row = base_row(spec, new_run_id(spec), Status.OK)
        timed = spec.task.timing.windows
        median = 1000.0 * SPEED.get(spec.task.options.knobs, 1.0)
        windows = [median * (1 + 0.01 * (i % 5 - 2)) for i in range(spec.task.timing.windows)]
        row.throughput = {"median": median, "ci_low": min(windows), "ci_high": max(windows), "windows": windows}
        row.test_accuracy = 0.9
        row.wall_s = {tune.SHORT_WINDOWS: SHORT_S, tune.DUET_WINDOWS: 2 * SHORT_S}.get(timed, FULL_S)
        now[0] += row.wall_s
        if store is not None:  # as execute stores it
            store.append(row)
        return row

    def play(specs, out, machine, first, pairing):  # a duet: the two runs, each side storing its own row
        return [runner.execute(spec, out, machine, None, store=ResultStore(out)) for spec in specs]

    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(duet, "play", play)
    return now


def test_the_settings_raced_are_the_defaults_then_each_knobs_values_one_at_a_time():
    from bench.run.runspec import RunSpec

    spec = RunSpec(get_variant("torch-ddp-static"), get_task("quick"), "cpu", 1, 2)
    assert tune.candidates(spec) == ["", "bucket_cap_mb=1.0", "bucket_cap_mb=5.0", "bucket_cap_mb=100.0",
                                     "gradient_as_bucket_view=false", "comm_hook=bf16_compress", "channels_last=true"]
    cut = tune.short(get_task("quick"))
    assert (cut.recipe.epochs, cut.timing.windows, cut.recipe.steps_per_epoch) == (1, 3, 2 + 3 * 4)


def test_a_full_length_run_is_priced_from_a_short_ones_parts():
    """A default-task short run and its full-length twin as measured here (2 slots, torch-ddp): 13.1 s and 36.1 s."""
    task = get_task("default")
    row = base_row_of_wall(13.08, {"startup": 8.86, "training": 2.17, "evaluation": 0.70, "checkpoints": 0.0,
                                   "other": 0.05, "teardown": 1.30})
    steps = tune.steps_trained(task) / tune.steps_trained(tune.short(task))  # 2 epochs of 468 against 80 steps
    assert tune.full_length_s(row, tune.short(task), task) == pytest.approx(
        8.86 + 2.17 * steps + 0.70 * 2 + 0.05 + 1.30)
    assert 33 < tune.full_length_s(row, tune.short(task), task) < 40  # the full run took 36.1 s


def base_row_of_wall(wall_s: float, split: dict):
    from bench.run.runspec import RunSpec

    spec = RunSpec(get_variant("torch-ddp"), get_task("default"), "cpu", 1, 2)
    row = base_row(spec, new_run_id(spec), Status.OK)
    row.wall_s, row.wall_split = wall_s, split
    return row


def test_tune_keeps_to_its_budget_finds_the_faster_setting_and_ranks_it_apart(tmp_path, fake_time, capsys,
                                                                             monkeypatch):
    from bench import cli
    from bench.analysis import verdict
    from bench.results import load

    budget_min = 22.0  # three duets of each of its 7 settings with its defaults, and the confirmation
    monkeypatch.setattr(tune, "now", lambda: fake_time[0])
    assert cli.main(["tune", "--variants", "torch-ddp", "--devices", "2", "--task", "quick",
                     "--budget", str(budget_min), "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert fake_time[0] <= 60 * budget_min  # every short run and the confirmation within the budget
    assert "torch-ddp: best bucket_cap_mb=100.0 (1.30x its defaults, 3 and 3 full runs; 8 of its 8 settings" in printed
    confirmed = load(tmp_path)
    assert sorted(confirmed["task.knobs"].fillna("")) == [""] * 3 + ["bucket_cap_mb=100.0"] * 3
    search = load(tmp_path / tune.SEARCH)
    assert set(search["task.windows"]) == {tune.DUET_WINDOWS} and len(search) == 2 * 3 * 7  # 3 duets a setting
    assert "paired by turns, ratio 1.300..1.300; gains: bucket_cap_mb=100.0; costs: bucket_cap_mb=1.0" in printed
    assert (tmp_path / RESULTS).exists() and verdict.TUNED in (tmp_path / "report.md").read_text()


def test_an_approach_without_knobs_or_a_budget_of_nothing_is_one_line_and_exit_2(tmp_path, capsys):
    from bench import cli

    assert cli.main(["tune", "--variants", "torch-single", "--task", "quick", "--budget", "5", "--out",
                     str(tmp_path)]) == 2
    assert cli.main(["tune", "--variants", "torch-ddp", "--task", "quick", "--budget", "0", "--out",
                     str(tmp_path)]) == 2
    assert cli.main(["tune", "--variants", "torch-ddp", "--task", "quick", "--budget", "5", "--allow-mixed-revisions",
                     "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == "error: --allow-mixed-revisions goes with --resume"
    # --zero-stage is deepspeed's; accelerate takes it only with its DeepSpeed plugin: refused before any run
    assert cli.main(["tune", "--variants", "torch-ddp,deepspeed,accelerate", "--zero-stage", "2", "--devices", "2",
                     "--task", "quick", "--budget", "5", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: accelerate: --zero-stage goes with")
    assert not (tmp_path / RESULTS).exists() and not (tmp_path / tune.SEARCH).exists()


def test_a_sweep_with_tune_tunes_its_approaches_with_knobs_at_the_most_devices(tmp_path, fake_time, capsys,
                                                                               monkeypatch):
    from bench import cli
    from bench.results import load

    monkeypatch.setattr(tune, "now", lambda: fake_time[0])
    assert cli.main(["sweep", "--variants", "torch-ddp,deepspeed,torch-single", "--zero-stage", "2", "--max-devices",
                     "2", "--task", "quick", "--no-analysis", "--tune", "45", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    # torch-single has no knobs, and deepspeed is named with its stage
    assert "torch-ddp: best bucket_cap_mb=100.0" in printed and "deepspeed (ZeRO-2): best" in printed
    assert "torch-single: best" not in printed
    rows = load(tmp_path)
    tuned = rows[rows["task.knobs"].fillna("") != ""]
    assert set(tuned["world_size"]) == {2} and "bucket_cap_mb=100.0" in set(tuned["task.knobs"])
    assert verdict_title_in(tmp_path / "report.md")


def verdict_title_in(report) -> bool:
    from bench.analysis import verdict

    return verdict.TUNED in report.read_text() and "### Each approach at its best" in report.read_text()


def test_sweep_tune_of_no_minutes_is_one_line_and_exit_2(tmp_path, capsys):
    from bench import cli

    assert cli.main(["sweep", "--variants", "torch-ddp", "--max-devices", "2", "--task", "quick", "--no-analysis",
                     "--tune", "0", "--out", str(tmp_path)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "error: --tune 0: give the tuning's minutes above 0, e.g. --tune 30"
    assert not (tmp_path / RESULTS).exists()


def test_a_stopped_tuning_resumes_with_the_runs_it_lacks_and_ends_as_the_whole_one(tmp_path, fake_time, capsys,
                                                                                   monkeypatch):
    """Stopped after some of its runs, `--resume` runs only the rest, charges the kept runs' recorded time to the
    budget, and so makes the choices and writes the rows the uninterrupted tuning did."""
    from bench import cli
    from bench.interrupt import Interrupted
    from bench.results import load
    from bench.sweep import runner

    monkeypatch.setattr(tune, "now", lambda: fake_time[0])
    executed = []
    execute = runner.execute

    def counted(spec, *args, **kwargs):
        if len(executed) == stop_after[0]:
            raise Interrupted(2)
        executed.append(spec.task.options.knobs)
        return execute(spec, *args, **kwargs)

    monkeypatch.setattr(runner, "execute", counted)
    request = ["tune", "--variants", "torch-ddp", "--devices", "2", "--task", "quick", "--budget", "9", "--pairing",
               "none"]
    stop_after = [None]
    assert cli.main([*request, "--out", str(tmp_path / "whole")]) == 0
    whole, found = list(executed), best_line(capsys.readouterr().out)

    stopped = tmp_path / "stopped"
    for stop_at in (5, len(whole) - 2 - 5):  # stopped in the race, then again in the confirmation
        executed.clear()
        stop_after[0] = stop_at
        resumed = ["--resume"] if stopped.exists() else []
        assert cli.main([*request, "--out", str(stopped), *resumed]) == 128 + 2
    stop_after[0], before = None, len(whole) - 2
    executed.clear()
    capsys.readouterr()
    assert cli.main([*request, "--out", str(stopped), "--resume"]) == 0
    assert executed == whole[before:]  # only the two runs it lacked
    assert best_line(capsys.readouterr().out) == found  # the same best, gain and runs
    for folder in ("", tune.SEARCH):  # the same runs finished (the stopped folder also holds the interrupted ones)
        finished = [load(f / folder) for f in (stopped, tmp_path / "whole")]
        assert [list(f[f["status"] == "ok"]["task.knobs"].fillna("")) for f in finished] == \
            [list(finished[1]["task.knobs"].fillna(""))] * 2


def best_line(printed: str) -> str:
    [line] = [line for line in printed.splitlines() if "torch-ddp: best" in line]
    return line


def test_the_batch_is_raced_only_with_tune_batch_and_only_where_it_stays_whole_batches():
    from bench.run.runspec import RunSpec

    spec = RunSpec(get_variant("torch-fsdp"), get_task("quick").for_world(2), "cpu", 1, 2)
    assert not [c for c in tune.candidates(spec) if "batch_scale" in c]
    assert tune.candidates(spec, ("--tune-batch",))[-3:] == ["batch_scale=0.5", "batch_scale=2.0", "batch_scale=4.0"]
    odd = RunSpec(get_variant("torch-fsdp"), get_task("quick", scaling="weak", per_device_batch=3).for_world(2),
                  "cpu", 1, 2)
    assert [c for c in tune.candidates(odd, ("--tune-batch",)) if "batch_scale" in c] == [
        "batch_scale=2.0", "batch_scale=4.0"]  # 1.5 samples a device is no batch


def test_a_budget_that_cannot_hold_the_confirmation_stops_once_priced_naming_the_budget_that_does(
        tmp_path, fake_time, capsys, monkeypatch):
    """Confirming anyway would overrun: 2 minutes hold the short run that prices a full-length one, not 3 of its
    defaults' full runs (the confirmation of an approach whose best is its defaults)."""
    from bench import cli

    monkeypatch.setattr(tune, "now", lambda: fake_time[0])
    assert cli.main(["tune", "--variants", "torch-ddp", "--devices", "2", "--task", "quick", "--budget", "2",
                     "--pairing", "none", "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: not tuned: the confirmation (1 approaches' best and defaults, 3 full-length runs")
    assert "more than the 2-minute budget: give --budget" in error
    assert fake_time[0] == SHORT_S and not (tmp_path / RESULTS).exists()  # only the pricing run ran


def test_a_budget_that_cannot_hold_the_pairing_stops_once_priced_naming_the_budget_that_does(
        tmp_path, fake_time, capsys, monkeypatch):
    """Paired, the first duet prices the rest: 5 minutes do not hold three duets of a setting and three full-length
    duets with the defaults; the line names the budget that does, and that budget tunes."""
    from bench import cli

    monkeypatch.setattr(tune, "now", lambda: fake_time[0])
    request = ["tune", "--variants", "torch-ddp", "--devices", "2", "--task", "quick"]
    assert cli.main([*request, "--budget", "5", "--out", str(tmp_path / "small")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: not tuned: pairing needs 3 short duets of a setting and 3 full-length duets")
    assert fake_time[0] == 2 * 2 * SHORT_S and not (tmp_path / "small" / RESULTS).exists()  # the pricing duet alone
    named = int(error.split("give --budget ")[1].split()[0])
    assert cli.main([*request, "--budget", str(named), "--out", str(tmp_path / "named")]) == 0


def test_a_budget_the_earlier_rows_price_below_the_pairing_is_refused_before_any_run(tmp_path, fake_time, capsys,
                                                                                    monkeypatch):
    """Where earlier rows of the task price a full-length run (the folder's own here), a budget below the paired
    confirmation is refused before the first run starts."""
    from bench import cli
    from bench.results import ResultStore
    from bench.run.runspec import RunSpec

    spec = RunSpec(get_variant("torch-ddp"), get_task("quick").for_world(2), "cpu", 1, 2)
    earlier = base_row(spec, new_run_id(spec), Status.OK)
    earlier.wall_s = 100.0
    ResultStore(tmp_path).append(earlier)
    assert cli.main(["tune", "--variants", "torch-ddp", "--devices", "2", "--task", "quick", "--budget", "9",
                     "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == ("error: not tuned: pairing needs at least 3 full-length duets with the defaults for each of "
                     "the 1 approaches, about 10.0 min by the earlier rows, more than the 9-minute budget: give "
                     "--budget 15 or more, or fewer approaches")
    assert fake_time[0] == 0 and not (tmp_path / tune.SEARCH).exists()


def test_the_summary_counts_the_settings_that_ran_and_those_that_did_not_fit():
    """ZeRO-2 under 1.25 GiB a rank (results/tune-cpu): 13 settings, 12 ran, none fitted; it once read "0 raced"."""
    found = [tune.Tuned("deepspeed (ZeRO-2)", "", 13, 12, [], [], settings_unfinished=12)]
    assert tune.summary(found, 60.0, 120.0).splitlines()[-1] == (
        "  deepspeed (ZeRO-2): best its defaults (not measured, 0 and 0 full runs; 12 of its 13 settings raced in the "
        "budget, 12 of them unfinished: did not fit or failed)")
