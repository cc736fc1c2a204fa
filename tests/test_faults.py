"""When the harness itself dies or is stopped: no process of the run outlives it, Ctrl-C records the run
as interrupted, a torn store is read and appended to, and a killed sweep resumes with exactly what is left."""
from __future__ import annotations

import contextlib
import json
import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.run.processes import kill_all_of_run, processes_of_run
from bench.run.reaper import named_semaphores
from helpers import CPU, REPO, bench, cli, rows

# Still training when the harness is stopped, however fast the machine (40 epochs took 3 s on an idle one).
LONG = ["--task", "quick", "--epochs", "1000", "--timeout", "300"]


def harness(out: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench", *args, "--out", str(out)], cwd=REPO,
                            env={**os.environ, **CPU}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def training_run(out: Path, alive, within: float = 240) -> str:
    """The id of the run once one of its ranks has trained a step (the harness still alive)."""
    deadline = time.time() + within
    while time.time() < deadline:
        assert alive(), "the harness ended before training started"
        for report in out.glob("runs/*/rank*.jsonl"):
            if '"first_step"' in report.read_text():
                return report.parent.name
        time.sleep(0.3)
    raise AssertionError(f"no rank trained a step within {within:.0f}s")


def left_after(run_id: str, seconds: float = 10) -> list[int]:
    """The run's processes still alive after up to `seconds` (the watchdog's deadline)."""
    deadline = time.time() + seconds
    while processes_of_run(run_id) and time.time() < deadline:
        time.sleep(0.2)
    return processes_of_run(run_id)


LAUNCHES = {
    "torchrun": ["--variant", "torch-ddp", "--devices", "2"],
    "accelerate launch": ["--variant", "accelerate", "--devices", "2"],
    "TF workers (TF_CONFIG)": ["--variant", "tf-multiworker", "--devices", "2"],
    "one process (python)": ["--variant", "tf-mirrored", "--devices", "2"],
    "ray": ["--variant", "torch-ddp", "--devices", "2", "--engine", "ray"],
    "dask": ["--variant", "torch-ddp", "--devices", "2", "--engine", "dask"],
    "spark": ["--variant", "torch-ddp", "--devices", "2", "--engine", "spark"],
}


@pytest.mark.slow
@pytest.mark.parametrize("launch", LAUNCHES)
def test_a_harness_killed_with_sigkill_leaves_no_process_of_its_run_and_its_row_recorded(tmp_path, launch):
    proc = harness(tmp_path, "run", *LAUNCHES[launch], *LONG)
    run_id = None
    try:
        run_id = training_run(tmp_path, lambda: proc.poll() is None)
        assert processes_of_run(run_id), "the run's processes should be found while it trains"
        semaphores = named_semaphores(processes_of_run(run_id))  # Dask's spawned workers make some
        assert bool(semaphores) == (launch == "dask")
        proc.kill()  # SIGKILL: no handler runs; the kernel and the run's watchdog must clean up
        proc.wait()
        assert left_after(run_id) == []
        # The watchdog appends the row once the run's processes are gone, then removes the row it was left.
        left = tmp_path / "runs" / run_id / "row-if-the-harness-dies.json"
        deadline = time.time() + 30
        while (not rows(tmp_path) or left.exists()) and time.time() < deadline:
            time.sleep(0.2)
        [row] = rows(tmp_path)
        assert (row["run_id"], row["status"]) == (run_id, "interrupted")
        assert row["error"].startswith("the harness ended with this run in flight")
        assert row["variant"] == LAUNCHES[launch][1] and row["environment"]["cpu_model"]
        assert not left.exists()
        # nor the semaphores whose resource tracker was killed with the run (12 a Dask run, in /dev/shm until reboot)
        assert not [p for p in Path("/dev/shm").glob("sem.*") if p.stat().st_ino in semaphores]
    finally:
        proc.kill()
        if run_id:
            kill_all_of_run(run_id)


@pytest.mark.slow
def test_ctrl_c_in_a_terminal_records_the_run_as_interrupted_and_exits_130(tmp_path):
    """A real pseudo-terminal: ^C goes through its line discipline to the foreground process group."""
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the harness, with the terminal as its controlling tty
        os.chdir(REPO)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as a shell gives it, whatever pytest was started under
        os.execve(sys.executable, [sys.executable, "-m", "bench", "run", *LAUNCHES["torchrun"], *LONG,
                                   "--sample-every", "0.5", "--out", str(tmp_path)], {**os.environ, **CPU})
    output, ended = bytearray(), []

    def alive() -> bool:
        drain(terminal, output)
        if not ended and (status := os.waitpid(pid, os.WNOHANG)) != (0, 0):
            ended.append(os.waitstatus_to_exitcode(status[1]))
        return not ended

    run_id = None
    try:
        run_id = training_run(tmp_path, alive)
        os.write(terminal, b"\x03")
        deadline = time.time() + 60
        while alive() and time.time() < deadline:
            time.sleep(0.1)
        assert ended, "the harness did not stop within 60s of ^C"
        assert ended == [130], output.decode(errors="replace")
        [row] = rows(tmp_path)
        assert (row["status"], row["run_id"]) == ("interrupted", run_id)
        assert "interrupted by SIGINT" in row["error"]
        # What the run did until ^C, kept once its processes were gone.
        assert row["timeseries"]["samples"] > 0 and list(tmp_path.glob(f"runs/{run_id}/timeseries.png"))
        assert "interrupted" in output.decode(errors="replace")  # the table of what was run is printed
        assert processes_of_run(run_id) == []
    finally:
        if not ended:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if run_id:
            kill_all_of_run(run_id)
        os.close(terminal)


def drain(fd: int, into: bytearray) -> None:
    """Read what the terminal holds, so that the harness never blocks writing to it."""
    import select

    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            return
        if not chunk:
            return
        into += chunk


@pytest.mark.slow
def test_a_torn_store_is_still_run_into_and_reported(tmp_path):
    first = bench("run", "--variant", "torch-single", "--task", "quick", "--out", str(tmp_path), env=CPU)
    assert first.returncode == 0, first.stderr
    store = tmp_path / "results.jsonl"
    complete = store.read_text()
    store.write_text(complete + complete[: len(complete) // 2])  # a kill in the middle of an append
    second = bench("run", "--variant", "torch-single", "--task", "quick", "--out", str(tmp_path), env=CPU)
    report = bench("report", str(tmp_path))
    for result in (second, report):
        assert result.returncode == 0, result.stderr
        warnings = [line for line in result.stderr.splitlines() if "not a complete row" in line]
        assert warnings == [f"warning: {store} line 2 is not a complete row (a torn or corrupt write): skipped"]
        assert "Traceback" not in result.stderr
    lines = store.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0]) == json.loads(complete)
    assert json.loads(lines[2])["status"] == "ok"  # the new row on a line of its own
    assert "2 runs" in report.stdout or report.stdout.count("torch-single") >= 1


@pytest.mark.slow
def test_a_killed_sweep_resumes_with_exactly_the_runs_it_lacks(tmp_path):
    from bench.results import ResultStore
    from bench.analysis import aggregate
    from bench.results.frame import frame

    sweep = ["sweep", "--variants", "torch-single,torch-ddp", "--max-devices", "2", "--task", "quick",
             "--no-analysis"]
    whole = bench(*sweep, "--out", str(tmp_path / "whole"), env=CPU)
    assert whole.returncode == 0, whole.stderr
    assert len(rows(tmp_path / "whole")) == 3

    part = tmp_path / "part"
    proc = harness(part, *sweep)
    try:
        while len(rows(part)) < 1:
            assert proc.poll() is None, "the sweep ended before its first row"
            time.sleep(0.2)
        proc.kill()  # after one run: the next is in flight, and its watchdog records it interrupted
        proc.wait()
    finally:
        proc.kill()
    for run_dir in part.glob("runs/*"):
        assert left_after(run_dir.name) == []
    # Each run folder gets its row from the watchdog, or, killed before its row was written, goes.
    deadline = time.time() + 30
    while ((started := {run_dir.name for run_dir in part.glob("runs/*")}) - {r["run_id"] for r in rows(part)}
           and time.time() < deadline):
        time.sleep(0.2)
    done = rows(part)
    assert {r["run_id"] for r in done} == started  # every run the sweep started has its row
    assert {r["status"] for r in done} <= {"ok", "interrupted"}
    ok = sum(r["status"] == "ok" for r in done)
    resumed = bench(*sweep, "--resume", "--out", str(part), env=CPU)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{ok} of 3 planned runs are there, {3 - ok} left" in resumed.stdout
    after = rows(part)
    assert after[: len(done)] == done and [r["status"] for r in after[len(done):]] == ["ok"] * (3 - ok)

    again = bench(*sweep, "--resume", "--out", str(part), env=CPU)
    assert "3 of 3 planned runs are there, 0 left" in again.stdout and len(rows(part)) == len(after)
    # the interrupted row aside, the resumed folder folds to the whole sweep's configurations
    folded = [aggregate.configurations(frame([r for r in ResultStore(d).dicts() if r["status"] == "ok"]), [])
              for d in (tmp_path / "whole", part)]
    assert list(folded[0].columns) == list(folded[1].columns)
    assert len(folded[0]) == len(folded[1]) == 3
    assert sorted(folded[0]["key"]) == sorted(folded[1]["key"])


def test_resume_across_revisions_is_refused_unless_allowed(tmp_path):
    from bench.results import ResultStore
    from helpers import result_row

    ResultStore(tmp_path).append(result_row("torch-single", git_sha="0" * 40))
    refused = cli("sweep", "--variants", "torch-single", "--max-devices", "1", "--task", "quick",
                  "--no-analysis", "--resume", "--out", str(tmp_path), "--timeout", "1", env=CPU)
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith("error: --resume:") and len(refused.stderr.strip().splitlines()) == 1
    assert "--allow-mixed-revisions" in refused.stderr


@pytest.mark.slow
def test_a_full_results_folder_ends_the_run_with_one_error_and_the_row_printed(tmp_path):
    import resource

    from bench.results import ResultStore
    from helpers import result_row

    ResultStore(tmp_path).append(result_row("torch-ddp", notes=["x" * 200_000]))
    limit = (tmp_path / "results.jsonl").stat().st_size + 100  # the next row does not fit: as a full disk

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    result = subprocess.run([sys.executable, "-m", "bench", "run", "--variant", "torch-single", "--task", "quick",
                             "--out", str(tmp_path)], cwd=REPO, env={**os.environ, **CPU}, capture_output=True,
                            text=True, preexec_fn=small_files, timeout=300)
    assert result.returncode == 1
    error, line = result.stderr.strip().splitlines()[-2:]
    assert error.startswith(f"error: cannot write to {tmp_path}: File too large: free space there or pass --out")
    row = json.loads(line)
    assert row["status"] == "ok" and row["variant"] == "torch-single" and row["throughput"]["median"] > 0
    assert [r["variant"] for r in rows(tmp_path)] == ["torch-ddp"]  # the store as it was, not torn


@pytest.mark.slow
def test_a_rank_slowed_on_purpose_is_named_a_straggler_in_the_row_and_the_report(tmp_path):
    # Rank 1's batches come 20 ms late each step (a slower disk): every rank's windows stretch alike, but its own
    # time a step does not.
    done = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", str(tmp_path),
                 env={**CPU, "DTBENCH_FAULT": "slow:rank=1:ms=20"})
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = rows(tmp_path)
    times = row["rank_times"]
    assert times["slowest_rank"] == 1 and times["behind_median"] > 0.10, times
    assert times["own_ms"]["1"] >= 20 > times["own_ms"]["0"], times
    assert bench("report", str(tmp_path)).returncode == 0
    report = (tmp_path / "report.md").read_text()
    assert "### Stragglers" in report and "rank 1 is a straggler" in report and "rank 0 is a straggler" not in report


def test_a_disk_that_fills_during_a_run_costs_its_time_series_not_its_row():
    import errno

    from bench.run.execute import saved

    class Full:
        def save(self, slots):
            raise OSError(errno.ENOSPC, "No space left on device")

    assert saved(Full(), {}) == (None, "its time series not saved: No space left on device")
    assert saved(None, {}) == (None, None)


def test_a_disk_full_before_a_run_starts_is_one_line_naming_the_fix(monkeypatch, capsys):
    import errno

    from bench import cli, commands

    def full(args):
        raise OSError(errno.ENOSPC, "No space left on device", "/results/runs/x/spec.json")

    monkeypatch.setattr(commands, "cmd_sweep", full)
    assert cli.main(["sweep", "--variants", "torch-single", "--out", "/results"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("error: No space left on device writing /results/runs/x/spec.json: free space there or pass --out "
                   "elsewhere; `bench sweep --resume` goes on from the rows recorded")


@pytest.mark.parametrize("stopped", [False, True])
def test_the_watchdog_is_gone_once_its_run_is_released_even_stopped(stopped):
    """Released, the watchdog exits by itself; one stopped (SIGSTOP, a debugger) is killed rather than left
    behind holding the harness's output open (the soak found one stopped for minutes after its run)."""
    import psutil

    from bench.run.reaper import Reaper

    reaper = Reaper("no-such-run")
    time.sleep(0.5)  # started
    if stopped:
        os.kill(reaper.pid, signal.SIGSTOP)
    within = 2 if stopped else 60
    began = time.monotonic()
    reaper.release(within_s=within)
    assert not psutil.pid_exists(reaper.pid)
    assert (time.monotonic() - began >= within) == stopped  # a running one was not killed: it exited when released


def test_a_run_whose_watchdog_was_killed_is_released_without_an_error(tmp_path):
    """The soak SIGKILLed a watchdog mid-run: telling it that it was let go raised BrokenPipeError in the harness."""
    import psutil

    from bench.run.reaper import Reaper

    row = tmp_path / "row.json"
    row.write_text("{}")
    reaper = Reaper("no-such-run", row, tmp_path / "results.jsonl")
    os.kill(reaper.pid, signal.SIGKILL)
    psutil.Process(reaper.pid).wait(timeout=10)
    reaper.release(within_s=10)
    assert not row.exists() and not (tmp_path / "results.jsonl").exists()  # the harness records the run itself


# A harness SIGKILLed between making a run's folder and writing its row, as between two runs of a sweep (the
# killed-sweep test above hit it on a fast CPU: a folder left empty, with no row).
DIES_BEFORE_ITS_ROW = """
import os, signal, sys
from pathlib import Path
from bench.run.reaper import Reaper, partial
run_dir, store, moment = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
reaper = Reaper("no-such-run", run_dir / "row.json", store)
print(reaper.pid, flush=True)
run_dir.mkdir(parents=True)
if moment == "writing":
    partial(run_dir / "row.json").write_text('{"run_id": "no-such-run", "sta')
if moment == "written-into":  # not a moment the harness has: what the watchdog must never remove
    (run_dir / "spec.json").write_text("{}")
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("moment", ["before-the-row", "writing", "written-into"])
def test_a_harness_killed_before_its_runs_row_is_whole_leaves_neither_folder_nor_row(tmp_path, moment):
    import psutil

    run_dir, store = tmp_path / "runs" / "no-such-run", tmp_path / "results.jsonl"
    dying = subprocess.run([sys.executable, "-c", DIES_BEFORE_ITS_ROW, str(run_dir), str(store), moment], cwd=REPO,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert dying.returncode == -signal.SIGKILL, dying.stderr
    watchdog = int(dying.stdout.split()[0])
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(watchdog).wait(timeout=30)
    assert run_dir.exists() == (moment == "written-into") and not store.exists()
    assert (tmp_path / "runs").is_dir()  # the folder the runs go in stays


# A harness SIGKILLed once its run's processes have ended, as it stores the run's row: the moment ResultStore.append
# is called for it ("before-the-row"), or once it has returned ("after-the-row", before the watchdog is let go).
DIES_AS_IT_STORES_THE_ROW = """
import os, signal, sys
from bench import cli
from bench.results.store import ResultStore
moment, out = sys.argv[1], sys.argv[2]
append = ResultStore.append

def dying(self, *args, **kwargs):
    if moment == "after-the-row":
        append(self, *args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

ResultStore.append = dying
cli.main(["run", "--variant", "torch-single", "--task", "quick", "--out", out])
"""


def watchdogs_of(run_id: str) -> list:
    import psutil

    return [p for p in psutil.process_iter(["cmdline"]) if "bench.run.reaper" in (p.info["cmdline"] or [])
            and run_id in p.info["cmdline"]]


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["before-the-row", "after-the-row"])
def test_a_harness_killed_as_it_stores_its_runs_row_leaves_the_run_exactly_one_row(tmp_path, moment):
    """The watchdog keeps the run's row until the harness has stored its own: killed before, the watchdog's is
    appended, saying so; killed after, the harness's stays the only one."""
    import psutil

    dying = subprocess.run([sys.executable, "-c", DIES_AS_IT_STORES_THE_ROW, moment, str(tmp_path)], cwd=REPO,
                           capture_output=True, text=True, env={**os.environ, **CPU, "PYTHONPATH": str(REPO)},
                           timeout=300)
    assert dying.returncode == -signal.SIGKILL, dying.stderr[-2000:]
    [run_dir] = tmp_path.glob("runs/*")
    assert (run_dir / "rank0.jsonl").exists()  # the run had ended: its ranks' reports are there
    for watchdog in watchdogs_of(run_dir.name):
        with contextlib.suppress(psutil.NoSuchProcess):
            watchdog.wait(timeout=30)
    assert [r["run_id"] for r in rows(tmp_path)] == [run_dir.name]
    [row] = rows(tmp_path)
    if moment == "before-the-row":
        assert row["status"] == "interrupted"
        assert row["error"].startswith("the harness ended after this run's processes had, before storing its row")
    else:
        assert row["status"] == "ok" and not row.get("error")
    assert not (run_dir / "row-if-the-harness-dies.json").exists() and left_after(run_dir.name, 0) == []


# The watchdog's side of it, without a run: told the run's processes ended, then the harness SIGKILLed before it
# stores the run's row ("ended"), after ("stored"), or after letting the watchdog go ("released").
DIES_AFTER_ITS_RUN = """
import json, os, signal, sys
from pathlib import Path
from bench.results.store import ResultStore
from bench.run.reaper import Reaper
run_dir, store, moment = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
reaper = Reaper("no-such-run", run_dir / "row.json", store)
print(reaper.pid, flush=True)
run_dir.mkdir(parents=True)
(run_dir / "row.json").write_text(json.dumps({"run_id": "no-such-run", "status": "interrupted", "error": "in flight"}))
reaper.ended()
if moment in ("stored", "released"):
    ResultStore(store.parent).append({"run_id": "no-such-run", "status": "ok", "error": None})
if moment == "released":
    reaper.release()
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("moment", ["ended", "stored", "released"])
def test_a_watchdog_keeps_its_runs_row_until_the_harness_has_stored_its_own(tmp_path, moment):
    import psutil

    run_dir, store = tmp_path / "runs" / "no-such-run", tmp_path / "results.jsonl"
    dying = subprocess.run([sys.executable, "-c", DIES_AFTER_ITS_RUN, str(run_dir), str(store), moment], cwd=REPO,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert dying.returncode == -signal.SIGKILL, dying.stderr
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(int(dying.stdout.split()[0])).wait(timeout=30)
    [row] = rows(tmp_path)  # one row whichever moment: never none, never two
    if moment == "ended":
        assert row["status"] == "interrupted"
        assert row["error"].startswith("the harness ended after this run's processes had, before storing its row")
    else:
        assert row["status"] == "ok"
    assert not (run_dir / "row.json").exists()


def test_a_disk_full_while_writing_a_runs_row_leaves_no_folder_of_it(tmp_path, monkeypatch):
    import errno

    from bench.run import execute
    from bench.run.runspec import RunSpec
    from bench.spec import devices
    from bench.spec.task import get_task
    from bench.spec.variants import get_variant

    def full(*_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(execute.os, "replace", full)  # the row written beside, then not moved into place
    spec = RunSpec(get_variant("torch-single"), get_task("quick"), "cpu", 1, 1, timeout_s=60)
    with pytest.raises(OSError, match="No space left"):
        execute.start_and_wait(spec, tmp_path, devices.Machine(cores=(0, 1)), None, environment={})
    assert list((tmp_path / "runs").iterdir()) == [] and not (tmp_path / "results.jsonl").exists()


def test_sigint_to_the_watchdog_while_it_starts_neither_kills_it_nor_prints_a_traceback(capfd):
    """The soak sent SIGINT to a watchdog during its imports: it died with a KeyboardInterrupt on the console."""
    import psutil

    from bench.run.reaper import Reaper

    reaper = Reaper("no-such-run")
    os.kill(reaper.pid, signal.SIGINT)  # before it has imported anything
    time.sleep(1.5)
    os.kill(reaper.pid, signal.SIGINT)  # and once it runs
    time.sleep(0.5)
    assert psutil.Process(reaper.pid).status() != psutil.STATUS_ZOMBIE
    reaper.release(within_s=60)
    assert not psutil.pid_exists(reaper.pid) and "Traceback" not in capfd.readouterr().err
