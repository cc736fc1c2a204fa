"""Runs across hosts that have their own network (namespace hosts, tests/hosts.py): the collectives leave by
the interface toward the master, never by loopback, and the row records it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import CPU, REPO, bench, rows
from hosts import two_hosts, why_no_namespaces

NO_NAMESPACES = why_no_namespaces()
needs_namespaces = pytest.mark.skipif(NO_NAMESPACES is not None, reason=str(NO_NAMESPACES))
PORT = "29561"


def agent(host, node_rank: int, master: str, out, *extra: str, variant: str = "torch-ddp") -> subprocess.Popen:
    argv = host.command(sys.executable, "-m", "bench", "run", "--variant", variant, "--devices", "2", "--nnodes", "2",
                        "--node-rank", str(node_rank), "--master-addr", master, "--master-port", PORT,
                        "--out", str(out), "--timeout", "300", *extra)
    return subprocess.Popen(argv, cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@needs_namespaces
@pytest.mark.parametrize("variant", ["torch-ddp", "accelerate"])
def test_a_run_across_two_hosts_with_their_own_addresses(tmp_path, variant):
    with two_hosts() as (h0, h1):
        agents = [agent(h, rank, h0.address, tmp_path / f"host{rank}", "--task", "default", "--epochs", "1",
                        variant=variant) for rank, h in enumerate((h0, h1))]
        outputs = [a.communicate(timeout=400) for a in agents]
        left = h0.pids() + h1.pids()
    assert [a.returncode for a in agents] == [0, 0], [o[1][-2000:] for o in outputs]
    [row] = rows(tmp_path / "host0")
    assert row["status"] == "ok" and row["world_size"] == 2 and row["nodes"] == 2
    assert row["eval_samples"] == 10_000  # every default-task test image once, across the two hosts
    assert row["environment"]["interface"] == h0.interface and row["environment"]["host_addr"] == h0.address
    assert "node 1: ok" in outputs[1][0]
    assert left == []  # nothing of the run outlives it on either host


@needs_namespaces
def test_an_unreachable_master_is_one_line_and_exit_2(tmp_path):
    with two_hosts(subnet=78) as (h0, _):
        done = subprocess.run(h0.command(sys.executable, "-m", "bench", "run", "--variant", "torch-ddp", "--devices",
                                         "2", "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.233.99.1",
                                         "--master-port", PORT, "--task", "quick", "--out", str(tmp_path)),
                              cwd=REPO, env={**os.environ, **CPU}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--master-addr 10.233.99.1: no route from this host" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and rows(tmp_path) == []


@needs_namespaces
def test_an_interface_this_host_lacks_is_refused(tmp_path):
    with two_hosts(subnet=79) as (h0, _):
        done = subprocess.run(h0.command(sys.executable, "-m", "bench", "run", "--variant", "torch-ddp", "--devices",
                                         "2", "--nnodes", "2", "--node-rank", "0", "--master-addr", h0.address,
                                         "--master-port", PORT, "--ifname", "eth9", "--task", "quick",
                                         "--out", str(tmp_path)),
                              cwd=REPO, env={**os.environ, **CPU}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--ifname eth9: no such interface" in done.stderr


def test_ifname_alone_is_refused(tmp_path):
    done = bench("run", "--variant", "torch-ddp", "--devices", "2", "--ifname", "lo", "--task", "quick",
                 "--out", str(tmp_path), env=CPU)
    assert done.returncode == 2 and "--ifname names a real multi-host run's interface" in done.stderr
