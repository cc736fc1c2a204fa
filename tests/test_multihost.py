"""Runs across hosts that have their own network (namespace hosts, bench/studies/netns.py): the collectives leave by
the interface toward the master, never by loopback, and the row records it."""
from __future__ import annotations

import concurrent.futures
import contextlib
import os
import socket
import subprocess
import sys
import time

import pytest

from helpers import CPU, REPO, SHORT, bench, cli, rows
from bench.hosts.exchange import NeverJoined, Offer, meet
from bench.hosts.loopback import free_port
from bench.studies.netns import two_hosts, why_no_namespaces

NO_NAMESPACES = why_no_namespaces()
needs_namespaces = pytest.mark.skipif(NO_NAMESPACES is not None, reason=str(NO_NAMESPACES))
PORT = "29561"


def agent(host, node_rank: int, master: str, out, *extra: str, variant: str = "torch-ddp") -> subprocess.Popen:
    argv = host.command(sys.executable, "-m", "bench", "run", "--variant", variant, "--devices", "2", "--nnodes", "2",
                        "--node-rank", str(node_rank), "--master-addr", master, "--master-port", PORT,
                        "--out", str(out), *extra, *([] if "--timeout" in extra else ["--timeout", "300"]))
    return subprocess.Popen(argv, cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
@needs_namespaces
@pytest.mark.parametrize("variant", ["torch-ddp", "torch-fsdp", "deepspeed", "lightning", "accelerate", "tf-multiworker",
                                     "tf-multiworker-node", "tf-ps"])
def test_a_run_across_two_hosts_with_their_own_addresses(tmp_path, variant):
    with two_hosts() as (h0, h1):
        agents = [agent(h, rank, h0.address, tmp_path / f"host{rank}", "--task", "default", "--epochs", "1",
                        *SHORT, variant=variant) for rank, h in enumerate((h0, h1))]
        outputs = [a.communicate(timeout=400) for a in agents]
        left = h0.pids() + h1.pids()
    assert [a.returncode for a in agents] == [0, 0], [o[1][-2000:] for o in outputs]
    [row] = rows(tmp_path / "host0")
    assert row["status"] == "ok" and row["world_size"] == 2 and row["nodes"] == 2
    assert row["eval_samples"] == 10_000  # every default-task test image once, across the two hosts
    assert row["environment"]["interface"] == h0.interface and row["environment"]["host_addr"] == h0.address
    assert row["environment"]["hosts"] == {"0": f"{h0.address} ({h0.interface})",  # every host, met before launch
                                           "1": f"{h1.address} ({h1.interface})"}
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


def meeting(port: int) -> concurrent.futures.Future:
    """Node 0's agent hosting a two-node meeting on loopback, in a thread; returns once it listens."""
    offer = Offer(0, 2, "torch-ddp", "127.0.0.1", "lo", [])
    hosted = concurrent.futures.ThreadPoolExecutor(1).submit(meet, offer, ("127.0.0.1", port), 30)
    deadline = time.monotonic() + 10
    while not subprocess.run(["ss", "-tlnH", f"sport = :{port}"], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline and not hosted.done(), hosted
        time.sleep(0.05)
    return hosted


def test_a_host_that_leaves_the_meeting_before_saying_which_node_it_is_fails_the_run_naming_it():
    port = free_port()
    hosted = meeting(port)
    socket.create_connection(("127.0.0.1", port)).close()
    with pytest.raises(NeverJoined, match=f"the host at 127.0.0.1 left the meeting at 127.0.0.1:{port} before"):
        hosted.result(timeout=30)


@pytest.mark.skipif(os.geteuid() != 0, reason="closing another socket (ss -K) needs CAP_NET_ADMIN")
def test_the_meetings_port_closed_under_it_fails_the_run_naming_who_had_not_joined():
    """The soak's seed 10 trial 73: `ss -K` on node 0's listener raised EINVAL out of accept(), a traceback and no
    row; the run fails with its reason, recorded as any host that never joined."""
    port = free_port()
    hosted = meeting(port)
    subprocess.run(["ss", "-K", "-t", "-a", f"( sport = :{port} )"], check=True, capture_output=True)
    with pytest.raises(NeverJoined, match=rf"the meeting at 127.0.0.1:{port} was closed before node\(s\) \[1\] joined"):
        hosted.result(timeout=30)


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
    done = cli("run", "--variant", "torch-ddp", "--devices", "2", "--ifname", "lo", "--task", "quick",
               "--out", str(tmp_path), env=CPU)
    assert done.returncode == 2 and "--ifname names a real multi-host run's interface" in done.stderr


def _exit(agent: subprocess.Popen) -> tuple[int, str]:
    out, err = agent.communicate(timeout=120)
    return agent.returncode, err.strip()


@needs_namespaces
def test_hosts_that_disagree_are_refused_on_every_host(tmp_path):
    """A node rank given twice, and mismatched --nnodes: one line naming the fix and exit 2 on every host, before
    anything starts."""
    with two_hosts(subnet=80) as (h0, h1):
        twice = [agent(h0, 0, h0.address, tmp_path / "a0", "--task", "quick", "--nnodes", "3", "--devices", "3", "--global-batch", "96"),
                 agent(h1, 1, h0.address, tmp_path / "a1", "--task", "quick", "--nnodes", "3", "--devices", "3", "--global-batch", "96"),
                 agent(h1, 1, h0.address, tmp_path / "a2", "--task", "quick", "--nnodes", "3", "--devices", "3", "--global-batch", "96")]
        twice = [_exit(a) for a in twice]
        apart = [agent(h0, 0, h0.address, tmp_path / "b0", "--task", "quick"),
                 agent(h1, 1, h0.address, tmp_path / "b1", "--task", "quick", "--nnodes", "3", "--devices", "3", "--global-batch", "96")]
        apart = [_exit(a) for a in apart]
        left = h0.pids() + h1.pids()
    assert [code for code, _ in twice] == [2, 2, 2], twice
    # The error is the one line after the run's progress line (node 0 hosts the meeting inside the run).
    assert all(err.splitlines()[-1].startswith("error: two hosts gave --node-rank 1")
               and err.count("error") == 1 for _, err in twice), twice
    assert [code for code, _ in apart] == [2, 2], apart
    assert all("give every host the same --nnodes" in err for _, err in apart), apart
    assert left == [] and all(rows(tmp_path / d) == [] for d in ("a0", "b0"))


@pytest.mark.slow
@needs_namespaces
def test_a_host_that_never_joins_fails_the_run_naming_it(tmp_path):
    with two_hosts(subnet=81) as (h0, _):
        code, _ = _exit(agent(h0, 0, h0.address, tmp_path, "--task", "quick", "--timeout", "5"))
    [row] = rows(tmp_path)
    assert code == 1 and row["status"] == "failed" and "node(s) [1] never joined" in row["error"]



@pytest.mark.slow
@needs_namespaces
def test_a_host_that_dies_mid_run_ends_it_everywhere_naming_it(tmp_path):
    """Node 1's agent killed once its ranks train: node 0's run fails within seconds, naming node 1, and no
    process of the run is left on either host."""
    with two_hosts(subnet=82) as (h0, h1):
        first = agent(h0, 0, h0.address, tmp_path / "host0", "--task", "default", "--epochs", "1")
        second = agent(h1, 1, h0.address, tmp_path / "host1", "--task", "default", "--epochs", "1")
        deadline = time.monotonic() + 120
        while not list((tmp_path / "host1").glob("runs/*/rank1.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # training
        second.kill()
        killed_at = time.monotonic()
        code, _ = _exit(first)
        ended_in = time.monotonic() - killed_at
        second.wait()
        left = h0.pids() + h1.pids()
    [row] = rows(tmp_path / "host0")
    assert code == 1 and row["status"] == "failed" and f"node 1 ({h1.address})" in row["error"]
    assert ended_in < 30 and left == []



@pytest.mark.slow
def test_a_master_port_in_use_is_one_line_on_node_0_and_a_failure_on_the_others(tmp_path):
    """Another program holds node 0's --master-port: node 0 cannot host the meeting (exit 2, one line); node 1,
    which reached that program instead, fails (node 0 keeps the rows) saying what to check."""
    squatter = socket.create_server(("127.0.0.1", 0))
    port = str(squatter.getsockname()[1])
    common = ("--variant", "torch-ddp", "--devices", "2", "--nnodes", "2", "--master-addr", "127.0.0.1",
              "--master-port", port, "--task", "quick", "--timeout", "5")
    with squatter:
        node0 = bench("run", *common, "--node-rank", "0", "--out", str(tmp_path / "n0"), env=CPU)
        node1 = bench("run", *common, "--node-rank", "1", "--out", str(tmp_path / "n1"), env=CPU)
    assert node0.returncode == 2 and node0.stderr.strip().splitlines()[-1] == (
        f"error: --master-port {port}: cannot listen on 127.0.0.1:{port} (Address already in use): "
        "give every host another free port")
    assert "Traceback" not in node0.stderr and rows(tmp_path / "n0") == []
    assert node1.returncode == 1 and "node 1: failed:" in node1.stdout and "on a port no other program holds" in node1.stdout


def _send(sender, receiver, megabytes: int) -> float:
    """Seconds to send `megabytes` over TCP from `sender` to `receiver` (a listener in the receiving namespace)."""
    listener = subprocess.Popen(receiver.command(sys.executable, "-c", (
        "import socket; s = socket.create_server(('0.0.0.0', 29590)); print('up', flush=True); c, _ = s.accept()\n"
        "while c.recv(1 << 20): pass")), stdout=subprocess.PIPE, text=True)
    assert listener.stdout.readline().strip() == "up"
    sent = subprocess.run(sender.command(sys.executable, "-c", (
        f"import socket, time; c = socket.create_connection(('{receiver.address}', 29590)); t = time.perf_counter()\n"
        f"c.sendall(bytes({megabytes << 20})); c.shutdown(socket.SHUT_WR); c.recv(1)\n"
        "print(time.perf_counter() - t)")), capture_output=True, text=True, timeout=60)
    listener.wait(timeout=30)
    return float(sent.stdout)


@needs_namespaces
def test_a_shaped_link_carries_no_more_than_its_rate_and_nothing_outlives_the_hosts():
    """What the projection check (benchmarks/projection_check.py) stands on: tc's token bucket caps the link between
    the hosts at the rate asked, and their namespaces (the qdiscs with them) go when the hosts do."""
    from bench.studies.netns import shape

    with two_hosts(subnet=83) as (h0, h1):
        unshaped = _send(h1, h0, 8)
        shape(h1, "100mbit")
        capped = _send(h1, h0, 8)
        qdisc = subprocess.run(h1.command("tc", "qdisc", "show", "dev", h1.interface), capture_output=True,
                               text=True).stdout
    assert "tbf" in qdisc and "rate 100Mbit" in qdisc
    assert 8 * 8 * 2**20 / capped < 1.1 * 100e6  # never above the rate (the bucket's 10 ms burst aside)
    assert capped > 3 * unshaped
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert h0.namespace not in listed and h1.namespace not in listed


@needs_namespaces
def test_namespaces_left_by_a_process_killed_outright_are_deleted_by_the_next_hosts():
    from bench.studies import netns

    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = f"{netns.PREFIX}{gone.pid}h0"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    try:
        with two_hosts(subnet=84):
            listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True)
    assert stale not in listed


@pytest.mark.slow
@needs_namespaces
def test_the_projection_check_interrupted_leaves_no_namespace_qdisc_or_process(tmp_path):
    import shutil
    import signal

    import psutil

    shutil.copytree(REPO / "results/projection-check-cpu/near-link", tmp_path / "near-link")  # measured: skipped
    check = subprocess.Popen([sys.executable, "benchmarks/projection_check.py", "--out", str(tmp_path),
                              "--rates", "50mbit", "--repeats", "1"], cwd=REPO, env={**os.environ, **CPU},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    namespace = f"dtb{check.pid}h0"

    def measuring_on_a_shaped_link() -> bool:
        # The host's own set-up runs commands inside it before its veth is there: wait for the measurement itself.
        inside = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True).stdout.split()
        commands = []
        for pid in inside:
            with contextlib.suppress(psutil.Error):
                commands.append(" ".join(psutil.Process(int(pid)).cmdline()))
        shaped = subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "show"], capture_output=True,
                                text=True).stdout
        return "rate 50Mbit" in shaped and any("collectives" in command for command in commands)

    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not measuring_on_a_shaped_link():
            time.sleep(0.2)
        under_way = measuring_on_a_shaped_link()
    finally:  # also when the wait itself fails: the check must not outlive the test
        check.send_signal(signal.SIGTERM)
        check.communicate(timeout=60)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert under_way  # it was measuring, its link shaped
    assert check.returncode != 0 and f"dtb{check.pid}" not in listed and left == []


@pytest.mark.slow
@needs_namespaces
def test_bench_collectives_across_two_hosts_measures_the_link_bench_project_reads(tmp_path):
    """Node 0's folder holds every collective at 2 ranks over 2 nodes, fitted; node 1's agent says its share ran;
    a 100 Mbit/s link measures as one (the ranks agree on each size's calls, and a slow size ends the sizes)."""
    from bench.projection import project
    from bench.studies.netns import shape

    with two_hosts(subnet=85) as (h0, h1):
        for host in (h0, h1):
            shape(host, "100mbit")
        agents = [subprocess.Popen(h.command(sys.executable, "-m", "bench", "collectives", "--devices", "2",
                                             "--nnodes", "2", "--node-rank", str(rank), "--master-addr", h0.address,
                                             "--master-port", PORT, "--out", str(tmp_path / f"host{rank}")),
                                   cwd=REPO, env={**os.environ, **CPU}, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True) for rank, h in enumerate((h0, h1))]
        outputs = [a.communicate(timeout=400) for a in agents]
        left = h0.pids() + h1.pids()
    assert [a.returncode for a in agents] == [0, 0], [o[1][-2000:] for o in outputs]
    assert "node 1: ok" in outputs[1][0] and "all_reduce      gloo 2x1:" in outputs[0][0]
    links = project.between_nodes(tmp_path / "host0")
    assert 0.7 * 100e6 / 8 < links["all_reduce"].busbw < 1.1 * 100e6 / 8
    assert left == []
