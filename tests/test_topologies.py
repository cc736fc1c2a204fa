"""Fake nodes on one machine, and a 2-host run with its node agents as separate processes on loopback."""
import json
import os
import subprocess
import sys

import pytest

from bench.hosts.loopback import free_port
from helpers import CPU, REPO, bench, cli, rows


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-ddp", "accelerate", "tf-multiworker"])
def test_fake_two_node_run_keeps_each_process_on_its_nodes_cores(out, variant):
    result = bench("run", "--variant", variant, "--devices", "2", "--nodes", "2", "--task", "quick",
                   "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert (row["nodes"], row["devices_per_node"], row["world_size"]) == (2, 1, 2)
    spec = json.loads((out / "runs" / row["run_id"] / "spec.json").read_text())
    node_cores = [{c for slot in plan["cpu_slots"] for c in slot} for plan in spec["node_plans"]]
    assert node_cores[0].isdisjoint(node_cores[1])
    for rank, cores in row["environment"]["cores"].items():
        assert set(cores) <= node_cores[int(rank)]  # one process per node here: rank = node
        assert row["environment"]["cuda_visible"][rank] == ""
    launches = row["command"].split(" ; ")
    assert len(launches) == 2 and all(part.endswith("&") for part in launches)


def test_single_process_variants_are_not_applicable_across_nodes(out):
    """A sweep across 2 fake nodes records DataParallel's run as skipped, with its reason, and starts nothing
    (torch-ddp across them: the test above)."""
    result = bench("sweep", "--variants", "torch-dp", "--devices", "2", "--nodes", "2", "--task", "quick",
                   "--no-analysis", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert (row["variant"], row["world_size"], row["nodes"], row["status"]) == ("torch-dp", 2, 2, "skipped")
    assert "not applicable" in row["error"] and not (out / "runs").exists()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-ddp", "accelerate"])
def test_two_hosts_on_loopback(tmp_path, variant):
    port = free_port()
    agents = [subprocess.Popen([sys.executable, "-m", "bench", "run", "--variant", variant, "--devices", "2",
                                "--nnodes", "2", "--node-rank", str(rank), "--master-addr", "127.0.0.1",
                                "--master-port", str(port), "--task", "quick", "--out", str(tmp_path / f"host{rank}")],
                               cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
              for rank in (0, 1)]
    outputs = [agent.communicate(timeout=300) for agent in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    [row] = rows(tmp_path / "host0")
    assert row["status"] == "ok" and row["world_size"] == 2 and row["nodes"] == 2
    assert row["eval_samples"] == 397
    assert rows(tmp_path / "host1") == []  # rank 0's host collects the row
    assert "node 1: ok" in outputs[1][0]


def test_multi_host_needs_a_shared_port(out):
    result = cli("run", "--variant", "torch-ddp", "--devices", "2", "--nnodes", "2", "--node-rank", "1",
                 "--task", "quick", "--out", str(out), env=CPU)
    assert result.returncode == 2 and "--master-port" in result.stderr


@pytest.mark.slow
def test_two_runs_at_once_on_one_machine_do_not_collide(tmp_path):
    agents = [subprocess.Popen([sys.executable, "-m", "bench", "run", "--variant", variant, "--devices", "2",
                                "--task", "quick", "--out", str(tmp_path / variant)],
                               cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
              for variant in ("torch-ddp", "accelerate")]
    outputs = [agent.communicate(timeout=300) for agent in agents]
    assert [a.returncode for a in agents] == [0, 0], outputs
    assert [rows(tmp_path / v)[0]["status"] for v in ("torch-ddp", "accelerate")] == ["ok", "ok"]
