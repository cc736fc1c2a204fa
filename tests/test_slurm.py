"""examples/slurm/dtbench.sbatch under a real Slurm (tests/slurm.py): slurmctld and one slurmd per namespace
host, jobs submitted with sbatch as a user would. The job's node agents meet at the allocation's first node,
train across the two hosts, and node 0's row is the job's result; scancel mid-run leaves nothing behind."""
from __future__ import annotations

import os
import sys
import time

import pytest

from helpers import CPU, REPO, SHORT, rows
from bench.studies.netns import two_hosts, why_no_namespaces
from slurm import slurm_cluster, why_no_slurm

NO_SLURM = why_no_namespaces() or why_no_slurm()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(NO_SLURM is not None, reason=f"no Slurm cluster here: {NO_SLURM}")]
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with two_hosts(subnet=84) as hosts, slurm_cluster(hosts, tmp_path_factory.mktemp("slurm")) as running:
        yield running


def submit(cluster, out, variant: str, *extra: str) -> str:
    """sbatch the example script from the checkout, as its header says; the job's id."""
    env = {**CPU, "PYTHON": sys.executable, "OUT": str(out)}
    exports = [f"{k}={v}" for k, v in env.items()]
    submitted = cluster.run("env", *exports, "sbatch", "--parsable", "--nodes=2", f"--chdir={REPO}",
                            f"--output={out}/job-%j.log", "examples/slurm/dtbench.sbatch", variant, "default",
                            "--epochs", "1", *extra)
    return submitted.strip().split(";")[0]


@pytest.mark.parametrize("variant", ["torch-ddp", "tf-multiworker"])
def test_the_sbatch_example_trains_across_the_allocation(cluster, tmp_path, variant):
    job = submit(cluster, tmp_path, variant, *SHORT)
    state = cluster.wait_for(job, ENDED, timeout_s=400)
    log = (tmp_path / f"job-{job}.log").read_text()
    assert state == "COMPLETED", log[-3000:]
    [row] = rows(tmp_path / "node0")
    h0, h1 = cluster.hosts
    assert row["status"] == "ok" and row["world_size"] == 2 and row["nodes"] == 2
    assert row["eval_samples"] == 10_000  # every default-task test image once, across the two Slurm nodes
    assert row["environment"]["hosts"] == {"0": f"{h0.address} ({h0.interface})",
                                           "1": f"{h1.address} ({h1.interface})"}
    assert "node 1: ok" in log and variant in log  # the other node's agent, and the job's own report
    assert cluster.job_processes(settle_s=30) == []


def test_scancel_mid_run_leaves_an_interrupted_row_and_no_process(cluster, tmp_path):
    job = submit(cluster, tmp_path, "torch-ddp")
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("node1/runs/*/rank1.jsonl")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)  # training
    cluster.run("scancel", job)
    state = cluster.wait_for(job, ENDED, timeout_s=60)
    left = cluster.job_processes(settle_s=30)
    [row] = rows(tmp_path / "node0")
    assert state == "CANCELLED" and left == []
    assert row["status"] == "interrupted" and "SIGTERM" in row["error"], row.get("error")
    assert not os.path.exists(tmp_path / "node1" / "results.jsonl")  # node 0 keeps the rows
