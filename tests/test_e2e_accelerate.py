"""The accelerate variant end to end on CPU, and the silent non-distributed launch caught."""
import dataclasses
import json

import pytest

from bench.worker import data
from bench.run import execute
from bench.run.runspec import RunSpec
from bench.spec import devices
from bench.spec.task import get_task
from bench.spec.variants import get_variant
from helpers import CPU, bench, rows


@pytest.mark.slow
def test_accelerate_on_two_processes(out):
    result = bench("run", "--variant", "accelerate", "--devices", "2", "--task", "quick", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["world_size"] == 2 and row["eval_samples"] == 397 and row["test_accuracy"] > 0.3
    assert row["environment"]["backend"] == "gloo"
    assert "accelerate.commands.launch --config_file" in row["command"]
    [config] = (out / "runs" / row["run_id"]).glob("accelerate_config_node0.json")
    settings = json.loads(config.read_text())
    assert settings["num_processes"] == 2 and settings["mixed_precision"] == "no"
    spec = json.loads((out / "runs" / row["run_id"] / "rank0.jsonl").read_text().splitlines()[0])
    assert spec["distributed_type"] == "DistributedType.MULTI_CPU"


@pytest.mark.slow
def test_silent_non_distributed_launch_is_recorded_as_failed(tmp_path, monkeypatch):
    """Without ACCELERATE_USE_CPU, `--multi_gpu` on a GPU-less box starts N processes that each
    train alone, without any error: the world-size check must turn that into a failed row."""
    real = execute.processes

    def without_cpu_switch(*args, **kwargs):
        procs = real(*args, **kwargs)
        return [dataclasses.replace(p, env={k: v for k, v in p.env.items() if k != "ACCELERATE_USE_CPU"})
                for p in procs]

    monkeypatch.setattr(execute, "processes", without_cpu_switch)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    spec = RunSpec(get_variant("accelerate"), get_task("quick"), "cpu", 1, 2, timeout_s=300)
    row = execute.execute(spec, tmp_path, devices.Machine(cores=(0, 1)), data.prepare(spec.task))
    assert row.status == "failed"
    assert "world of size [1] but the plan is 2" in row.error
