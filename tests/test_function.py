"""Your own function, measured (`@dtbench.distributed`): a script of the user's, run as they would run it, gets a
row like a built-in run's under torchrun and Dask; one that raises, hangs or never calls `dtbench.step` gets a row
saying so, the script exits non-zero, and nothing of the run is left running or in /dev/shm."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench.spec.task import SpecError
from bench.sweep import function
from bench.run.processes import processes_of_run
from helpers import CPU, REPO, rows, with_own_shm

SCRIPT = '''
import sys, time
import torch
import torch.distributed as dist
from torch import nn
import dtbench

KIND, ENGINE, OUT = sys.argv[1:4]
ADDRESS, MLFLOW = (sys.argv[5:7] + [None, None])[:2]  # an existing cluster, a tracking server

@dtbench.distributed(devices=2, engine=ENGINE, out=OUT, timeout=float(sys.argv[4]), warmup_steps=2,
                     window_steps=4, windows=3, all_ranks=True, address=ADDRESS, mlflow=MLFLOW)
def train(steps):
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(steps):
        if KIND == "raises" and step == 3 and dist.get_rank() == 1:
            raise ValueError("step three went wrong")
        if KIND == "hangs" and step == 3:
            time.sleep(3600)
        x = torch.randn(16, 8)
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()
        if KIND != "never_steps":
            dtbench.step(len(x))
    if KIND == "ok":
        dtbench.evaluate(correct=dist.get_rank() + 1, total=10)
    return dist.get_rank()

print("returned", train(20))
'''


def run_script(tmp_path: Path, kind: str, engine: str, timeout_s: float = 120, dtbench_at: Path = REPO,
               *services: str):
    """The script run from a folder of its own, as its user would run it; what it printed, its rows, what it left.
    `services`: the cluster's address and the tracking server's URL to use."""
    script = tmp_path / "own.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = tmp_path / "out"
    done, shm = with_own_shm([sys.executable, str(script), kind, engine, str(out), str(timeout_s), *services],
                             env={**CPU, "PYTHONPATH": str(dtbench_at)}, timeout=400, cwd=tmp_path)
    return done, rows(out), shm


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    """dtbench's wheel, built from the checkout and installed into a folder of its own (its dependencies are this
    environment's)."""
    wheels, site = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("site")
    def pip(*args: str) -> None:
        subprocess.run([sys.executable, "-m", "pip", *args], check=True, capture_output=True, timeout=300, cwd=wheels)

    pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(REPO))
    [wheel] = wheels.glob("dtbench-*.whl")
    pip("install", "--no-deps", "-q", "--target", str(site), str(wheel))
    return site


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["torchrun", "dask", "spark", "ray"])
def test_a_decorated_function_gets_a_row_with_throughput_and_every_ranks_value(tmp_path, engine, installed_wheel):
    done, [row], _ = run_script(tmp_path, "ok", engine, dtbench_at=installed_wheel)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(installed_wheel) in row["command"]  # its ranks import the wheel's dtbench, not the checkout's
    assert "returned [0, 1]" in done.stdout
    assert (row["status"], row["engine"], row["variant"], row["world_size"]) == ("ok", engine, "train", 2)
    assert len(row["throughput"]["windows"]) == 3
    assert row["throughput"]["ci_low"] <= row["throughput"]["median"] <= row["throughput"]["ci_high"]
    assert row["throughput"]["median"] > 0 and row["startup_s"] > 0 and row["step_time_ms"]["median"] > 0
    # The engine's share of start-up: its cluster up and the ranks handed their function, before torch's import
    assert 0 < row["engine_startup_s"] < row["startup_s"]
    assert f"s the engine's) -> {tmp_path / 'out'}" in done.stderr  # the summary line says it too
    assert (row["test_accuracy"], row["eval_samples"]) == (0.15, 20)  # 1 + 2 right of 10 + 10: summed over ranks
    assert row["function"]["module"] == "__main__" and len(row["function"]["source_sha256"]) == 64
    assert row["timeseries"]["ranks"] and row["peak_memory_mb"] > 0


FAULTS = {  # what the row says, and its status
    "raises": ("failed", "ValueError: step three went wrong"),
    "hangs": ("timeout", "timeout"),
    "never_steps": ("failed", "returned without calling dtbench.step"),
}


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["torchrun", "dask"])
@pytest.mark.parametrize("kind", FAULTS)
def test_a_failing_hung_or_stepless_function_gets_a_row_saying_so_and_leaves_nothing(tmp_path, engine, kind):
    done, [row], shm = run_script(tmp_path, kind, engine, timeout_s=75 if kind == "hangs" else 180)
    status, reason = FAULTS[kind]
    assert done.returncode != 0
    assert "FunctionFailed" in done.stderr
    assert row["status"] == status and reason in row["error"], row["error"]
    if kind == "raises":  # one traceback, the function's own line in it
        assert row["error"].count("Traceback") <= 1 and "step three went wrong" in row["error"]
    assert processes_of_run(row["run_id"]) == []
    assert not shm  # a private /dev/shm (root): what the run left there; None without root


def test_a_function_is_named_module_colon_name_or_refused_with_the_fix():
    assert function.load("tests.engine_functions:rank_report").__name__ == "rank_report"
    for bad, says in (("no_colon", "give MODULE:FUNCTION"), ("tests.engine_functions:absent", "has no attribute"),
                      ("no_such_module_here:f", "No module named")):
        with pytest.raises(SpecError, match=says):
            function.load(bad)


def one(x):
    return x + 1


def other(x):
    return x + 2


def test_the_row_names_the_function_by_its_source_whatever_its_arguments(tmp_path):
    assert function.identity(one)["source_sha256"] != function.identity(other)["source_sha256"]
    [a] = function.specs(one, (1,), {}, tmp_path, ["dask"], [2])
    [b] = function.specs(one, (2,), {}, tmp_path, ["dask"], [2])
    assert dict(a.variant.approach)["function"] == dict(b.variant.approach)["function"]
    assert dict(a.variant.approach)["payload"] != dict(b.variant.approach)["payload"]  # the arguments differ


def test_step_outside_a_decorated_function_names_the_fix():
    import dtbench

    with pytest.raises(RuntimeError, match="decorated with @dtbench.distributed"):
        dtbench.step(8)


def test_the_wheel_ships_dtbench():
    text = (REPO / "pyproject.toml").read_text()
    assert '"dtbench"' in text.split("[tool.setuptools.packages.find]")[1].split("\n")[1]
    assert json.loads(json.dumps(function.identity(function.load)))["name"] == "load"


def sweep(tmp_path: Path, target: str, engines: str, devices: str, *timing: str):
    return subprocess.run([sys.executable, "-m", "bench", "sweep", "--function", target, "--engines", engines,
                           "--devices", devices, "--out", str(tmp_path), *timing], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **CPU}, timeout=900)


@pytest.mark.slow
def test_a_sweep_ranks_one_function_across_two_engines_and_one_and_two_devices(tmp_path):
    done = sweep(tmp_path, "examples.mlp_regression:train", "torchrun,dask", "1,2",
                 "--warmup-steps", "4", "--window-steps", "10", "--windows", "3")
    assert done.returncode == 0, done.stderr[-3000:]
    got = {(r["engine"], r["world_size"]): r for r in rows(tmp_path)}
    assert set(got) == {(e, n) for e in ("torchrun", "dask") for n in (1, 2)}
    assert all(r["status"] == "ok" and r["throughput"]["median"] > 0 for r in got.values())
    assert all(r["timeseries"]["ranks"] == list(range(r["world_size"])) for r in got.values())  # the engine's ranks
    report = (tmp_path / "report.md").read_text()
    assert "train [dask]" in report and "verdict" in report.lower()
    assert re.search(r"\| engine s +\|", report)  # the engines' start-up side by side
    assert not list(tmp_path.glob("*-accuracy.png"))  # nothing evaluated: no empty accuracy plot


EXAMPLES = {  # each seed's program under the engine it names
    "examples.dask_pytorch_ddp_train:train": "dask",
    "examples.torch_distributor_main_fn:main_fn": "spark",
    "examples.mlp_regression:train": "torchrun",
}


@pytest.mark.slow
@pytest.mark.parametrize("target", EXAMPLES)
def test_the_seeds_programs_with_two_lines_added_each_get_a_row(tmp_path, target):
    engine = EXAMPLES[target]
    if engine == "spark":
        pytest.importorskip("pyspark")
    done = sweep(tmp_path, target, engine, "2")
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = rows(tmp_path)
    assert (row["status"], row["engine"], row["function"]["name"]) == ("ok", engine, target.split(":")[1])
    assert len(row["throughput"]["windows"]) == row["windows"]  # the default task's windows all fit
    if "dask" in target:
        assert row["eval_samples"] == 2048  # dtbench.evaluate: each rank's share, summed


def test_sweep_function_refuses_a_name_it_cannot_import_in_one_line():
    from helpers import cli

    done = cli("sweep", "--function", "no_such_module_here:train", "--engines", "torchrun,dask")
    assert done.returncode == 2 and "--function no_such_module_here:train" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_function_runs_on_an_existing_dask_cluster_and_prints_its_mlflow_runs_link(tmp_path):
    """The user's own cluster (`dask scheduler`, `dask worker`) and tracking server (`mlflow server`): the decorated
    function and `bench sweep --function --dask-scheduler` run there, each row says where, the printed link is the
    server's run of the row, and the cluster is left running as it was found."""
    pytest.importorskip("mlflow")
    import urllib.request

    from clusters import dask_cluster, mlflow_server

    with dask_cluster(tmp_path) as (address, client), mlflow_server(tmp_path) as tracking:
        done, [row], _ = run_script(tmp_path, "ok", "dask", 180, REPO, address, tracking)
        assert done.returncode == 0, done.stderr[-3000:]
        assert (row["status"], row["engine"], row["engine_address"]) == ("ok", "dask", address)
        assert "returned [0, 1]" in done.stdout
        [link] = [line.split("MLflow run ", 1)[1] for line in done.stderr.splitlines() if "dtbench: MLflow run" in line]
        assert link.startswith(f"{tracking}/#/experiments/")
        run_id = link.rsplit("/runs/", 1)[1]
        with urllib.request.urlopen(f"{tracking}/api/2.0/mlflow/runs/get?run_id={run_id}", timeout=10) as got:
            logged = json.load(got)["run"]
        assert logged["info"]["run_name"] == row["run_id"]
        [median] = [m["value"] for m in logged["data"]["metrics"] if m["key"] == "throughput_median"]
        assert median == pytest.approx(row["throughput"]["median"])

        swept = sweep(tmp_path / "sweep", "examples.mlp_regression:train", "dask", "2", "--dask-scheduler", address,
                      "--warmup-steps", "4", "--window-steps", "10", "--windows", "3")
        assert swept.returncode == 0, swept.stderr[-3000:]
        [row] = rows(tmp_path / "sweep")
        assert (row["status"], row["engine_address"]) == ("ok", address)
        assert len(client.scheduler_info()["workers"]) == 2  # the user's cluster outlives the runs
