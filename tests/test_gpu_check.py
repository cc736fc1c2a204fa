"""`bench gpu-check`, the one-GPU check (bench.studies.gpu_check), on a machine without a GPU: its plan, its dry run,
its refusal, and its logic (skips for a missing package, the budget, the limits, how each step's outcome is read)
with fake packages, a fake clock and trivial processes. Nothing trains."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.spec.task import SpecError
from bench.status import Status
from bench.studies import gpu_check
from bench.studies.gpu_check import Finished, Outcome, Step
from helpers import CPU, REPO, cli

APPROACHES = {"torch-single", "torch-dp", "torch-ddp", "torch-fsdp", "deepspeed", "lightning", "accelerate"}


def flag(argv: tuple[str, ...], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_the_plan_runs_the_peer_check_and_compile_first_then_every_approach_the_memory_cap_and_the_audit(tmp_path):
    steps = gpu_check.plan(tmp_path)
    runs = [s for s in steps if s.group == "approaches"]
    assert {flag(s.argv, "--variant") for s in runs} == APPROACHES
    stages = sorted(flag(s.argv, "--zero-stage") for s in runs if flag(s.argv, "--variant") == "deepspeed")
    assert stages == ["1", "2", "3"]
    assert sorted(str(flag(s.argv, "--accelerate-plugin")) for s in runs
                  if flag(s.argv, "--variant") == "accelerate") == ["None", "deepspeed", "fsdp"]
    for step in runs:  # ResNet-50, 224 px, bf16, batch 256, on the GPU, short timing, into the one folder
        assert step.argv[0] == "run" and flag(step.argv, "--task") == "resnet50"
        assert (flag(step.argv, "--image-size"), flag(step.argv, "--precision"), flag(step.argv, "--global-batch"),
                flag(step.argv, "--device-type"), flag(step.argv, "--windows")) == ("224", "bf16", "256", "cuda", "3")
        assert flag(step.argv, "--out") == str(tmp_path)
    assert runs[0].name == "torch-single"  # the plain loop first: energy and compile read its row
    memory = [s for s in steps if s.group == "memory"]
    assert [s.expect for s in memory] == ["ok", Status.DOES_NOT_FIT]
    assert float(flag(memory[0].argv, "--device-memory")) > float(flag(memory[1].argv, "--device-memory"))
    [peer] = [s for s in steps if s.group == "peer"]
    assert peer.argv[:len(gpu_check.PEER)] == gpu_check.PEER and "--repeats" in peer.argv
    assert "--model timm:resnet50 --framework torch --device-type cuda --image-size 224 --channels 3 --input " \
           "synthetic --global-batch 256 --precision bf16 --repeats 2 --windows 4" in shlex.join(peer.argv)
    [compiled] = [s for s in steps if s.group == "compile"]
    assert "--compile" in compiled.argv and flag(compiled.argv, "--variant") == "torch-single"
    [audit] = [s for s in steps if s.group == "audit"]
    assert audit.argv[0] == "audit" and flag(audit.argv, "--device-type") == "cuda" and "--again" in audit.argv
    [energy] = [s for s in steps if s.group == "energy"]
    assert energy.argv == () and energy.needs == ("pynvml", "pyarrow")
    order = [s.group for s in steps]
    assert order.index("energy") > max(i for i, g in enumerate(order) if g == "approaches")
    # What a lent GPU is for first: the plain loop's eager figure, the peer check and compiled against eager; the
    # other approaches, the memory cap and the audit after, where a short budget leaves them to a second call.
    assert order[:3] == ["approaches", "peer", "compile"]
    assert [g for g in dict.fromkeys(order)] == ["approaches", "peer", "compile", "energy", "memory", "audit",
                                                 "tensorflow", "report"]
    assert {flag(s.argv, "--variant") for s in steps if s.group == "tensorflow"} == {"tf-single", "tf-mirrored"}
    assert all(s.estimate_s <= s.limit_s for s in steps if s.argv) and len({s.name for s in steps}) == len(steps)


def test_without_pyarrow_the_runs_go_unsampled_and_energy_is_skipped(tmp_path):
    steps = gpu_check.plan(tmp_path, sampled=False)
    runs = [s for s in steps if s.argv[:1] == ("run",)]
    assert runs and all(flag(s.argv, "--sample-every") == "0" for s in runs)
    assert not any("--sample-every" in s.argv for s in gpu_check.plan(tmp_path))
    [energy] = [s for s in steps if s.group == "energy"]
    assert gpu_check.skip_reason(energy, 100, lambda name: name != "pyarrow") == "pyarrow not installed here"


def test_only_picks_groups_or_steps_and_refuses_other_names(tmp_path):
    steps = gpu_check.plan(tmp_path)
    assert {s.group for s in gpu_check.select(steps, "peer,compile")} == {"peer", "compile"}
    assert [s.name for s in gpu_check.select(steps, "deepspeed (ZeRO-3)")] == ["deepspeed (ZeRO-3)"]
    with pytest.raises(SpecError, match="--only nope"):
        gpu_check.select(steps, "peer,nope")


def test_dry_run_prints_every_command_with_its_estimate_and_exits_0_without_a_gpu():
    done = cli("gpu-check", "--dry-run", env=CPU)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    steps = gpu_check.plan(gpu_check.default_out(None))
    for index, step in enumerate(steps, 1):
        [line] = [line for line in lines if line.startswith(f"{index:2}. [{step.group}] {step.name}:")]
        assert f"about {step.estimate_s:.0f} s" in line
        assert (f"-m bench {shlex.join(step.argv)}" if step.argv else step.about) in line
    assert "no GPU here" in lines[0] and lines[-1].startswith("estimated on one H100:")


def test_without_a_gpu_it_says_so_in_one_line_and_exits_2():
    done = cli("gpu-check", env=CPU)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and done.stderr.startswith("error: no GPU here")


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_gpu_check_without_a_gpu_is_one_line_and_its_dry_run_exits_0():
    # as typed at a shell: under `make test` the outer make's level would prefix its error line with make[1], and
    # its ARGS (pytest's) would reach the command
    shell = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "ARGS")}

    def make(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "-s", "gpu-check", "SETUP=none", f"PYTHON={sys.executable}", *extra], cwd=REPO,
                              capture_output=True, text=True, timeout=120, env={**shell, **CPU})

    refused = make()
    ours = [line for line in (refused.stdout + refused.stderr).splitlines() if not line.startswith("make:")]
    assert refused.returncode == 2 and len(ours) == 1 and "no GPU here" in ours[0]
    assert make("ARGS=--dry-run").returncode == 0


def fake_run(calls: list[list[str]], returncode: int = 0):
    def run(cmd: list[str], limit_s: float, log: Path) -> Finished:
        calls.append(cmd)
        return Finished(returncode, "done\n", "")
    return run


def test_a_missing_package_is_a_one_line_skip_and_never_runs(tmp_path):
    steps = [s for s in gpu_check.plan(tmp_path) if s.group in ("approaches", "tensorflow")]
    calls: list[list[str]] = []
    lacking = {"deepspeed", "tensorflow"}
    outcomes = gpu_check.run_steps(steps, tmp_path, 10_000, available=lambda name: name not in lacking,
                                   run=fake_run(calls))
    skipped = {o.name: o.figure for o in outcomes if o.status == "skipped"}
    assert set(skipped) == {"deepspeed (ZeRO-1)", "deepspeed (ZeRO-2)", "deepspeed (ZeRO-3)",
                            "accelerate (deepspeed plugin, ZeRO-2)", "tf-single", "tf-mirrored"}
    assert skipped["deepspeed (ZeRO-1)"] == "deepspeed not installed here"
    assert skipped["accelerate (deepspeed plugin, ZeRO-2)"] == "deepspeed not installed here"
    assert skipped["tf-single"] == "tensorflow not installed here"
    assert not any("deepspeed" in cmd or "tf-single" in cmd for cmd in calls) and len(calls) == 7
    gpu_check.write_folder(tmp_path, outcomes, header())
    readme = (tmp_path / "README.md").read_text()
    assert "- deepspeed (ZeRO-1): deepspeed not installed here\n" in readme and "Traceback" not in readme
    summary = json.loads((tmp_path / gpu_check.SUMMARY).read_text())
    assert [s["status"] for s in summary["steps"]].count("skipped") == 6


def test_a_carried_wheel_without_its_own_dependencies_is_a_skip_that_names_them(tmp_path):
    [zero1] = [s for s in gpu_check.plan(tmp_path) if s.name == "deepspeed (ZeRO-1)"]
    lacking = {"hjson", "py-cpuinfo"}
    reason = gpu_check.skip_reason(zero1, 1000, lambda name: name not in lacking,
                                   lambda name: ("hjson", "torch", "py-cpuinfo") if name == "deepspeed" else ())
    assert reason == "deepspeed's hjson, deepspeed's py-cpuinfo not installed here"
    # torch's and timm's own requirements are the machine's business: never looked for
    assert gpu_check.skip_reason(zero1, 1000, lambda name: name not in lacking, lambda name: ("hjson",)) == \
        "deepspeed's hjson not installed here"


def header() -> dict:
    return {"gpu": "NVIDIA H100 80GB HBM3", "command": "python -m bench gpu-check", "started_at": "2026-12-01T00:00:00",
            "git_sha": "abc", "python": "python3", "budget_s": 480.0}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def trivial(name: str, estimate_s: float, limit_s: float = 60.0) -> Step:
    return Step(name, "approaches", ("list",), estimate_s, limit_s, judge="output")


def test_when_the_budget_is_spent_the_remaining_steps_are_skipped_for_lack_of_time(tmp_path):
    clock, calls, limits = Clock(), [], []

    def run(cmd, limit_s, log):  # each step takes 100 s of the fake clock
        calls.append(cmd)
        limits.append(limit_s)
        clock.now += 100
        return Finished(0, "ok\n", "")

    steps = [trivial("a", 90), trivial("b", 90, limit_s=500), trivial("c", 90), trivial("d", 10), trivial("e", 1)]
    outcomes = gpu_check.run_steps(steps, tmp_path, 250, available=lambda name: True, clock=clock, run=run)
    assert [o.status for o in outcomes] == ["ok", "ok", "skipped", "ok", "skipped"]
    assert outcomes[2].figure == "no time left: about 90 s needed, 50 s of the budget left"
    assert outcomes[4].figure.startswith("no time left")
    assert limits == [60, 150, 50]  # a step's limit is cut to what is left of the budget
    # The dry run's forecast: every step taking its estimate
    assert gpu_check.forecast(steps, 250, lambda name: True) == [
        None, None, "no time left: about 90 s needed, 70 s of the budget left", None, None]


def test_a_step_past_its_limit_is_stopped_and_recorded_as_a_timeout(tmp_path):
    def sleeper(cmd, limit_s, log):  # a real process in place of `python -m bench ...`
        return gpu_check.run_command([sys.executable, "-c", "import time; time.sleep(30)"], limit_s, log)

    steps = [trivial("sleeps", 0.1), trivial("after", 0.1)]
    outcomes = gpu_check.run_steps(steps, tmp_path, 1.5, available=lambda name: True, run=sleeper)
    assert [o.status for o in outcomes] == ["timeout", "skipped"]
    assert outcomes[0].figure.startswith("stopped at its limit of") and outcomes[0].seconds < 10
    assert outcomes[1].figure.startswith("no time left")
    assert (tmp_path / gpu_check.LOGS / "sleeps.log").read_text().startswith("$ ")


def write_rows(folder: Path, *rows: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "results.jsonl").open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def row(variant: str = "torch-single", status: str = "ok", rate: float | None = 2500.0, **task) -> dict:
    return {"variant": variant, "status": status, "task": {"name": "resnet50", **task}, "error": None,
            "throughput": {"median": rate} if rate else None, "peak_memory_mb": 11296.0,
            "timeseries": {"gpu_mean_power_w": [650.0], "energy_j_per_sample": 0.26, "gpu_energy_j": 12000.0}}


def test_each_steps_outcome_is_read_from_its_row(tmp_path):
    steps = {s.group + s.expect: s for s in gpu_check.plan(tmp_path)}
    done = Finished(0, "", "")
    fits, not_fit = steps["memoryok"], steps["memory" + Status.DOES_NOT_FIT]
    refused = {**row(status=Status.DOES_NOT_FIT, rate=None, device_memory_gib=2),
               "memory": {"refused_allocation_mb": 392.0}}
    assert gpu_check.judge(not_fit, tmp_path, done, [refused], 150) == \
        ("ok", "does not fit in 2 GiB: an allocation of 392 MiB refused")
    assert gpu_check.judge(not_fit, tmp_path, done, [row(device_memory_gib=2)], 150)[0] == "failed"
    assert gpu_check.judge(fits, tmp_path, done, [row(device_memory_gib=24)], 150) == \
        ("ok", "2,500 images/s, peak 11,296 MiB, under a 24 GiB cap")
    failed = {**row(status="failed", rate=None),
              "error": "rank 0 exited with 1\nModuleNotFoundError: No module named 'hjson'"}
    assert gpu_check.judge(fits, tmp_path, done, [failed], 150) == \
        ("failed", "failed: ModuleNotFoundError: No module named 'hjson'")
    refused_early = Finished(2, "", "error: asked for 1 GPUs but 0 are visible: lower GPUS/--devices\n")
    assert gpu_check.judge(fits, tmp_path, refused_early, [], 150) == \
        ("failed", "error: asked for 1 GPUs but 0 are visible: lower GPUS/--devices")
    assert gpu_check.judge(steps["energyok"], tmp_path, None, [], 0) == \
        ("failed", "no ok torch-single row in the folder to read: its step did not pass")
    write_rows(tmp_path, row(rate=2000.0), row(device_memory_gib=24), row(rate=3000.0, compile=True))
    assert gpu_check.judge(steps["energyok"], tmp_path, None, [], 0) == \
        ("ok", "650 W mean over the run, 0.260 J per image at 2,000 images/s (12,000 J in all)")
    compiled = {**row(rate=3000.0, compile=True), "first_step_s": 71.2}
    assert gpu_check.judge(steps["compileok"], tmp_path, done, [compiled], 450) == \
        ("ok", "3,000 images/s compiled, 1.50x eager's 2,000; compiling took 71 s")


def test_the_peer_step_reads_its_ratios(tmp_path):
    [peer] = [s for s in gpu_check.plan(tmp_path) if s.group == "peer"]
    (tmp_path / "overhead").mkdir()
    from bench.studies import overhead

    def side(rate):
        return {"median": rate, "mean": rate}

    # What `bench overhead` writes: its rounds and the ratios it folds from them.
    pairs = [{"harness": side(2800.0), "plain": side(2800.0), "peer": side(2828.3), "peer_as_shipped": side(2600.0)},
             {"harness": side(2900.0), "plain": side(2900.0), "peer": side(2900.0), "peer_as_shipped": side(2700.0)}]
    summary = {"torch": {"pairs": pairs, **overhead.summarise(pairs)}}
    (tmp_path / "overhead" / "overhead.json").write_text(json.dumps(summary))
    status, figure = gpu_check.judge(peer, tmp_path, Finished(0, "last line\n", ""), [], 420)
    assert status == "ok" and figure.startswith("dtbench 2,850 images/s; / timm's benchmark with dtbench's SGD")
    assert "0.995 [0.990, 1.000]" in figure and "/ plain loop (median of windows) 1.000" in figure
    assert "as shipped (Nesterov SGD) 1.075" in figure
    (tmp_path / "overhead" / "overhead.json").write_text("{}")  # another shape: its own last line instead
    assert gpu_check.judge(peer, tmp_path, Finished(0, "last line\n", ""), [], 420) == ("ok", "last line")
    assert gpu_check.judge(peer, tmp_path, Finished(1, "", "Traceback ...\nRuntimeError: boom\n"), [], 420) == \
        ("failed", "RuntimeError: boom")


def test_a_second_call_with_only_keeps_the_other_steps_earlier_outcomes(tmp_path):
    full = gpu_check.plan(tmp_path)
    first = [Outcome(s.name, s.group, "ok" if s.group != "peer" else "skipped", 1.0, "x", "", "2026-12-01T00:01:00")
             for s in full]
    gpu_check.write_folder(tmp_path, first, header())
    only = gpu_check.select(full, "peer")
    earlier = gpu_check.earlier_outcomes(tmp_path, {s.name for s in full} - {s.name for s in only})
    now = [Outcome(only[0].name, "peer", "ok", 200.0, "dtbench 2,850 images/s", "", "2026-12-01T01:00:00")]
    merged = gpu_check.merged(full, now, earlier)
    assert [o.name for o in merged] == [s.name for s in full]
    assert [o.status for o in merged].count("skipped") == 0 and merged[[s.group for s in full].index("peer")] == now[0]


def test_bench_audit_without_a_switch_for_the_device_is_one_line_and_exit_2(tmp_path):
    done = cli("audit", "--framework", "tensorflow", "--device-type", "cuda", "--task", "quick", "--out",
               str(tmp_path), env=CPU)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: no fast-path switch of tensorflow is audited on cuda: see FAST_PATH_SWITCHES in bench/spec/variants.py"]


def test_the_audit_step_reads_its_switches(tmp_path):
    [audit] = [s for s in gpu_check.plan(tmp_path) if s.group == "audit"]
    switch = {"framework": "torch", "switch": "channels_last", "chosen": True, "ratio": 1.21, "ratio_low": 1.18,
              "ratio_high": 1.24, "errors": []}
    (tmp_path / "fast_path.jsonl").write_text(json.dumps(switch) + "\n")
    wrote = f"torch on cuda, ...\nwritten to {tmp_path / 'fast_path.jsonl'}\n"
    assert gpu_check.judge(audit, tmp_path, Finished(0, wrote, ""), [], 600) == \
        ("ok", "channels_last on/off 1.21x [1.18, 1.24] (dtbench runs it on)")
    assert gpu_check.judge(audit, tmp_path, Finished(2, "", "error: asked for 1 GPUs but 0 are visible\n"), [], 600) \
        == ("failed", "error: asked for 1 GPUs but 0 are visible")  # the file there is an earlier call's
