"""`bench maxbatch`: the largest batch an approach trains, out-of-memory caught and recorded as such."""
import json

import pytest

from bench.results import ResultRow
from bench.results.maxbatch import load as found_batches
from bench.studies import maxbatch
from bench.run.runspec import RunSpec
from bench.spec.task import get_task
from bench.spec.variants import get_variant
from bench.run.processes import processes_of_run
from helpers import CPU, bench, cli, rows


def fake_runs(largest_per_device: int, other_failure_at: int | None = None):
    """A runner whose probes fit up to `largest_per_device` a device and run out of memory above it."""
    seen = []

    def run(spec: RunSpec) -> ResultRow:
        per_device = spec.task.recipe.global_batch // spec.world_size
        seen.append(per_device)
        if per_device == other_failure_at:
            status, error = "failed", "rank 0: ValueError: a bug"
        elif per_device > largest_per_device:
            status, error = "does not fit", "rank 1: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
        else:
            status, error = "ok", None
        return ResultRow(run_id=f"r{len(seen)}", started_at="t", status=status, variant=spec.variant.name,
                         framework="torch", launcher="torchrun", device_type="cpu", nodes=1,
                         devices_per_node=spec.devices_per_node, world_size=spec.world_size,
                         task=spec.task.to_dict(), error=error)
    return run, seen


def spec(devices: int = 2, batch: int = 64) -> RunSpec:
    return RunSpec(get_variant("torch-ddp"), get_task("quick", global_batch=batch), "cpu", 1, devices)


def test_the_search_doubles_then_bisects_to_the_exact_largest_batch():
    run, seen = fake_runs(largest_per_device=100)
    found = maxbatch.search(spec(), run, max_batch=10**6)
    assert (found.largest_fitting, found.smallest_failing) == (200, 202)  # global batches over 2 devices
    assert seen[:3] == [32, 64, 128]  # doubling from the task's per-device batch
    assert all(p["global_batch"] % 2 == 0 for p in found.probes)
    assert [p["out_of_memory"] for p in found.probes].count(True) == sum(1 for s in seen if s > 100)


def test_a_start_that_does_not_fit_bisects_down_and_nothing_fitting_says_so():
    run, _ = fake_runs(largest_per_device=5)
    assert maxbatch.search(spec(), run, max_batch=10**6).largest_fitting == 10
    run, _ = fake_runs(largest_per_device=0)
    found = maxbatch.search(spec(), run, max_batch=10**6)
    assert (found.largest_fitting, found.smallest_failing) == (None, 2)


def test_everything_up_to_the_cap_fitting_is_reported_as_such():
    run, seen = fake_runs(largest_per_device=10**9)
    found = maxbatch.search(spec(), run, max_batch=256)
    assert (found.largest_fitting, found.smallest_failing) == (256, None) and seen == [32, 64, 128]


def test_a_failure_that_is_not_memory_ends_the_search_with_its_error_keeping_what_fits():
    run, _ = fake_runs(largest_per_device=100, other_failure_at=64)
    found = maxbatch.search(spec(), run, max_batch=10**6)
    assert found.largest_fitting == 64 and found.smallest_failing is None and "a bug" in found.error


def test_the_cap_itself_is_probed_and_a_start_above_it_starts_at_it():
    run, seen = fake_runs(largest_per_device=10**9)
    assert maxbatch.search(spec(devices=3, batch=96), run, max_batch=1000).largest_fitting == 999
    assert seen == [32, 64, 128, 256, 333]
    run, seen = fake_runs(largest_per_device=10**9)
    assert maxbatch.search(spec(batch=64), run, max_batch=40).largest_fitting == 40 and seen == [20]


def test_on_a_cpu_the_search_needs_a_device_memory(tmp_path):
    result = cli("maxbatch", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", str(tmp_path),
                 env=CPU)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "--device-memory" in line


@pytest.mark.slow
def test_out_of_memory_under_the_limit_is_caught_recorded_and_searched_past(tmp_path):
    """Default task, torch-ddp on 2 ranks of 1.5 GiB each (RLIMIT_DATA): 8192 does not fit, and the search halves
    until a batch fits. Where it fits depends on the CPU (an import of torch alone takes 790 MiB of data on an AMD
    EPYC, more where more cores mean more threads), so the test asserts the search, not one machine's answer."""
    result = bench("maxbatch", "--variant", "torch-ddp", "--devices", "2", "--task", "default", "--device-memory",
                   "1.5", "--global-batch", "8192", "--max-batch", "8192", "--resolution", "1024",
                   "--out", str(tmp_path), env=CPU, timeout=590)
    assert result.returncode == 0, result.stderr[-3000:]
    [found] = found_batches(tmp_path / "maxbatch")
    probes = found["probes"]
    assert probes[0]["global_batch"] == 8192 and probes[0]["out_of_memory"]
    fitting = [p["global_batch"] for p in probes if p["status"] == "ok"]
    failing = [p["global_batch"] for p in probes if p["out_of_memory"]]
    assert fitting, f"nothing fitted under 1.5 GiB a rank: {probes}"
    assert len(fitting) + len(failing) == len(probes)  # every failure was an out-of-memory, caught as such
    largest, smallest_failing = max(fitting), min(failing)
    assert largest < smallest_failing <= largest + 2 * 1024  # bisected down to --resolution a device
    assert (f"largest global batch that trains under 1.5 GiB a rank: {largest} ({smallest_failing} does not fit)"
            in result.stdout)
    recorded = rows(tmp_path / "maxbatch")
    assert [r["status"] for r in recorded] == [p["status"] for p in probes]
    assert recorded[0]["status"] == "does not fit" and recorded[0]["memory"]["refused_allocation_mb"] > 0
    assert "can't allocate memory" in recorded[0]["error"]
    assert all(r["task"]["input"] == "synthetic" for r in recorded)
    assert all(processes_of_run(r["run_id"]) == [] for r in recorded)
    assert json.loads((tmp_path / "maxbatch" / "runs" / probes[0]["run_id"] / "spec.json").read_text())[
        "task"]["options"]["device_memory_gib"] == 1.5


@pytest.mark.slow
def test_zero_fits_a_batch_of_ddps_order_under_the_same_limit(tmp_path):
    """Measured under 3000 MiB a rank: DDP 22,528, ZeRO-1 and ZeRO-3 19,968. With DeepSpeed's default buckets
    (5e8 elements, allocated whatever the model) ZeRO-3 fitted 128 and ZeRO-1 256. On a CPU DeepSpeed also
    compiles its shared-memory op as it starts: before the limit applies, or the compiler runs out of it."""
    result = bench("maxbatch", "--variant", "deepspeed", "--zero-stage", "3", "--devices", "2", "--task", "default",
                   "--device-memory", "3", "--global-batch", "8192", "--max-batch", "8192",
                   "--out", str(tmp_path), env=CPU, timeout=590)
    assert result.returncode == 0, result.stderr[-3000:]
    [found] = found_batches(tmp_path / "maxbatch")
    assert (found["largest_fitting"], found["smallest_failing"]) == (8192, None), found["probes"]
    config = json.loads((tmp_path / "maxbatch" / "runs" / found["probes"][0]["run_id"] / "deepspeed_config.json")
                        .read_text())
    assert config["zero_optimization"]["reduce_bucket_size"] == 25 * 2**20 // 4
