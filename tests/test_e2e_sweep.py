"""End to end on CPU: real processes, real launchers, the quick task. One sweep over every TensorFlow variant and
the PyTorch ones of each kind, which this file's tests read; the runs it cannot hold (a crash, a hang) beside it."""

import shutil

import pytest

from bench.run.processes import processes_of_run
from bench.worker import kernels
from bench.spec.variants import VARIANTS
from helpers import CPU, bench, configurations, rows


def assert_good_row(row, variant, world):
    assert row["status"] == "ok", row["error"]
    assert row["variant"] == variant and row["world_size"] == world
    assert row["throughput"]["median"] > 0
    assert row["throughput"]["ci_low"] <= row["throughput"]["median"] <= row["throughput"]["ci_high"]
    assert len(row["throughput"]["windows"]) == row["windows"]
    assert row["eval_samples"] == 397  # the whole digits test set, each sample once
    assert row["test_accuracy"] > 0.3  # chance is 0.1
    assert row["startup_s"] > 0 and row["train_s"] > 0
    # The ranks' CPU time a sample: each rank pinned to one core can spend at most that core's time.
    assert 0 < row["host_cpu_ms_per_sample"] <= 1.5 * 1e3 * world / row["throughput"]["median"]
    assert row["environment"]["libraries"]["torch"] and row["environment"]["dtbench"][0].isdigit()
    assert row["command"] and row["git_sha"] is not None


# Every test here reads the sweep, which one of them waits for (pytest-timeout counts a fixture's set-up).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SWEPT = [v.name for v in VARIANTS.values() if v.in_default_sweep and (
    v.family == "tensorflow" or v.name in ("torch-ddp", "torch-fsdp", "torch-dp", "torch-single"))]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A sweep end to end over every TensorFlow variant and the PyTorch ones of each kind (the replicated, the
    sharded, the single-process, the plain loop), 1 and 2 slots: its folder and the command's output, shared by this file's tests
    (each run is mostly its frameworks' start-up). Every other PyTorch approach sweeps in test_models (a timm
    model, 1 and 2 slots) and test_sharded_variants (each ZeRO stage, FSDP and Fabric against DDP)."""
    out = tmp_path_factory.mktemp("swept")
    result = bench("sweep", "--task", "quick", "--variants", ",".join(SWEPT), "--max-devices", "2",
                   "--no-analysis", "--out", str(out), env=CPU, timeout=1400)
    assert result.returncode == 0, result.stderr
    return out, result


def swept_row(out, variant: str, world: int) -> dict:
    [row] = [r for r in rows(out) if (r["variant"], r["world_size"]) == (variant, world)]
    return row


def test_ddp_on_two_processes(swept):
    out, _ = swept
    row = swept_row(out, "torch-ddp", 2)
    assert_good_row(row, "torch-ddp", 2)
    assert row["launcher"] == "torchrun" and row["environment"]["backend"] == "gloo"
    # Each rank pinned to its own core.
    assert len({tuple(c) for c in row["environment"]["cores"].values()}) == 2
    assert not list((out / "runs").glob("*/tmp/torchelastic_*/*/attempt_*/*/error.json"))


def test_dp_on_one_cpu_slot_says_so(swept):
    out, _ = swept
    row = swept_row(out, "torch-dp", 1)
    assert_good_row(row, "torch-dp", 1)
    assert any("plain module" in note for note in row["notes"])


def test_sweep_records_scaling_efficiency_and_marks_dp_not_applicable(swept):
    out, result = swept
    by_key = {(r["variant"], r["world_size"]): r for r in rows(out)}
    assert not any(r["independent"] for r in rows(out))  # --no-analysis: no no-sync runs
    derived = {(k.variant, k.world_size): e for k, e in zip(*configurations(out, "scaling_efficiency"))}
    assert derived[("torch-ddp", 2)] > 0
    assert by_key[("torch-fsdp", 2)]["status"] == "ok" and by_key[("torch-fsdp", 2)]["test_accuracy"] > 0.5
    assert all(r["status"] == "ok" for r in rows(out) if r["variant"] != "torch-dp"), \
        [(r["variant"], r["error"]) for r in rows(out) if r["status"] != "ok"]
    assert {r["variant"] for r in rows(out)} == set(SWEPT)
    assert by_key[("torch-dp", 2)]["status"] == "skipped"
    assert "not applicable" in by_key[("torch-dp", 2)]["error"]
    assert (out / "results.csv").exists() and (out / "report.md").exists()
    assert "torch-ddp" in result.stdout and "scaling eff." in result.stdout
    # Each approach ran at 2 slots first: a provisional answer came before the 1-slot runs, marked as such.
    provisional = result.stdout.index("provisional answer, after ")
    assert provisional < result.stdout.index("scaling eff.") and "2 CPU slots" in result.stdout[provisional:][:2000]
    assert "still to run: " in result.stdout[provisional:]


def test_efficiency_against_the_plain_single_device_loop(swept):
    out, _ = swept
    by_key = {(r["variant"], r["world_size"]): r for r in rows(out)}
    assert ("torch-single", 2) not in by_key  # a baseline runs on one device only
    assert by_key[("torch-single", 1)]["status"] == "ok"
    derived = {(k.variant, k.world_size): e for k, e in zip(*configurations(out, "scaling_efficiency_vs_single"))}
    assert derived[("torch-ddp", 2)] > 0


@pytest.mark.parametrize("variant", ["tf-mirrored", "tf-multiworker"])
def test_tf_variant_on_two_replicas(swept, variant):
    row = swept_row(swept[0], variant, 2)
    assert row["status"] == "ok", row["error"]
    assert row["environment"]["replicas"] == 2
    assert row["eval_samples"] == 397 and row["test_accuracy"] > 0.3
    assert row["throughput"]["median"] > 0 and row["framework_version"].startswith("2.")
    assert row["host_cpu_ms_per_sample"] > 0  # TensorFlow's step runs on the clock's process too
    if variant == "tf-multiworker":
        assert "TF_CONFIG=" in row["command"] and row["command"].count("tf_impl.multiworker") == 2
    if kernels.is_x86():  # TensorFlow on its fast path here: oneDNN, whatever TensorFlow's default for this CPU
        assert row["environment"]["kernels"]["onednn"] is True and row["fast_path"]["onednn"] is True
        assert row["environment"]["kernels"]["onednn_switch"] == "1" and "TF_ENABLE_ONEDNN_OPTS=1" in row["command"]
    assert row["environment"]["kernels"]["cpu_isa"] == kernels.instruction_sets()


def test_tf_ps_trains_asynchronously_and_says_so(swept):
    """A chief, a worker a slot and a parameter server; flagged asynchronous in the row and the table, and ended
    with the run (tests/test_tf_ps.py kills one of them)."""
    out, result = swept
    row = swept_row(out, "tf-ps", 2)
    assert row["status"] == "ok" and row["asynchronous"] is True, row["error"]
    assert row["eval_samples"] == 397 and row["test_accuracy"] >= row["task"]["target_accuracy"]
    assert "tf-ps (asynchronous)" in result.stdout
    assert row["environment"]["workers"] == 2 and row["environment"]["parameter_servers"] == 1
    logs = sorted(p.name for p in (out / "runs" / row["run_id"]).glob("*.log"))
    assert logs == ["node0-chief0.log", "node0-ps0.log", "node0-worker0.log", "node0-worker1.log"]
    assert processes_of_run(row["run_id"]) == []  # the servers were ended with the run


def test_a_crash_and_a_hang_are_recorded_and_earlier_rows_kept(swept, out):
    shutil.copytree(swept[0], out)  # the earlier rows: the sweep's
    earlier, kept = (out / "results.jsonl").read_text(), len(rows(out))

    crash = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", str(out),
                  env={**CPU, "DTBENCH_FAULT": "crash:rank=1:step=3"})
    assert crash.returncode == 1
    row = rows(out)[-1]
    assert row["status"] == "failed" and "rank 1: RuntimeError: injected crash at step 3" in row["error"]
    # On its first line, the one a table shows: which process died, and why.
    assert "exit code" in row["error"].splitlines()[0] and "injected crash" in row["error"].splitlines()[0]

    hang = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", str(out),
                 "--timeout", "45", env={**CPU, "DTBENCH_FAULT": "hang:rank=0:step=2"}, timeout=300)
    assert hang.returncode == 1
    row = rows(out)[-1]
    assert row["status"] == "timeout" and "timeout" in row["error"]
    # Before the kill, each rank wrote its stacks: the hung rank was in the injected sleep, its peer waiting
    # for it in a collective; files of processes that were never asked are gone.
    where = row["error"].split("where each process waited")[1].split(":\n")[0]
    assert "rank0: in inject (bench/worker/faults.py:" in where and "rank1: in " in where, row["error"]
    stacks = sorted(p.name for p in (out / "runs" / row["run_id"] / "stacks").iterdir())
    assert stacks == ["rank0.txt", "rank1.txt"]
    assert not (out / "runs" / rows(out)[0]["run_id"] / "stacks").exists()  # the run that ended: none kept
    assert (out / "results.jsonl").read_text().startswith(earlier)
    assert [r["status"] for r in rows(out)[kept:]] == ["failed", "timeout"]
    # Nothing of the hung run is left behind.
    assert processes_of_run(row["run_id"]) == []
