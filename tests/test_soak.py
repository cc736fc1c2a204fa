"""A short soak (benchmarks/soak.py): random faults injected into quick sweeps by a seeded chaos driver; after each,
nothing of the run is left, the store is whole, every row says why, and --resume trains to the undisturbed figures."""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import time

import pytest

from helpers import CPU, REPO
from bench.studies.netns import why_no_namespaces


@pytest.mark.slow
def test_a_short_soak_leaves_nothing_and_resumes_every_trial_to_the_undisturbed_figures(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    # Seed 13992's two trials: SIGKILL to a DataLoader worker of torch-ddp reading from the S3 server on one node,
    # then a port a rank of tf-multiworker listens on closed across two namespace hosts; where this machine cannot
    # make those, the same first trial and SIGTERM to a watchdog of torch-ddp reading files on two fake nodes.
    hosts = why_no_namespaces() is None
    # Each run's --timeout well above a run's time on a loaded CI machine (the default 40 s timed one out there).
    done = subprocess.Popen([sys.executable, "benchmarks/soak.py", "--trials", "2", "--seed", "13992", "--timeout",
                             "90", "--out",
                             str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **CPU})
    _, err = done.communicate(timeout=900)
    assert done.returncode == 0, err[-2000:]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"dtb{done.pid}h" not in namespaces  # the soak's two hosts went with it
    trials = [json.loads(line) for line in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert [(t["placement"], t["variant"], t["input"], t["drawn"], t["fault"]) for t in trials] == (
        [("one node", "torch-ddp", "s3", "loader worker", "SIGKILL"),
         ("two hosts", "tf-multiworker", "memory", "rank", "closed port")] if hosts else
        [("one node", "torch-ddp", "s3", "loader worker", "SIGKILL"),
         ("two fake nodes", "torch-ddp", "files", "watchdog", "SIGTERM")])
    assert any(t["injected"] for t in trials), trials  # a run may end before its moment on a fast machine
    assert [t for t in trials if soak.failed(t)] == []
    assert "trials with any of these wrong: 0" in (tmp_path / "summary.md").read_text()


def test_a_ranks_traceback_quoted_in_a_printed_row_is_its_reason_not_a_traceback_on_the_console(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    row = json.dumps({"status": "failed", "error": "node0 exit code 1:\nTraceback (most recent call last):\n..."})
    assert not soak.printed_traceback(f"error: cannot write to /x: No space left on device\n{row}\n")
    assert soak.printed_traceback("[1/1] torch-ddp\nTraceback (most recent call last):\n  File \"x\"\nOSError: 28\n")


@pytest.mark.skipif(os.geteuid() != 0, reason="closing another process's sockets (ss -K) needs CAP_NET_ADMIN")
def test_a_closed_port_closes_its_listener_and_connections_and_no_other_port(monkeypatch):
    import socket

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    def pair():
        listener = socket.socket(socket.AF_INET6)
        listener.bind(("::", 0))
        listener.listen()
        client = socket.create_connection(("127.0.0.1", listener.getsockname()[1]))
        return listener, client, listener.accept()[0]

    (closed, client, served), (kept, other_client, other_served) = pair(), pair()
    port = closed.getsockname()[1]
    # This process may listen on other ports too (an in-process gloo group of an earlier test): each is kept.
    before = soak.listening({os.getpid()}, None)
    assert before[port] == before[kept.getsockname()[1]] == os.getpid()
    soak.close_port(port, None)
    assert soak.listening({os.getpid()}, None) == {p: pid for p, pid in before.items() if p != port}
    for sock in (client, served):
        sock.settimeout(5)
        with pytest.raises(ConnectionError):  # aborted or reset by ss -K, not timed out waiting
            sock.send(b"x")
            sock.recv(1)
    other_client.send(b"x")
    assert other_served.recv(1) == b"x"
    for sock in (closed, client, served, kept, other_client, other_served):
        sock.close()


def test_an_undisturbed_sweep_short_of_a_planned_run_stops_the_driver_and_is_trained_again(tmp_path, monkeypatch):
    """Taken as the reference, a sweep whose ZeRO-1 run timed out would fail every later trial of the setup as
    'unplanned': the driver stops, and the folder is set aside so that the next one trains it again."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    setup = soak.Setup("deepspeed", "two fake nodes", "files")
    folder = tmp_path / "reference" / "deepspeed-two-fake-nodes-files"
    folder.mkdir(parents=True)

    def row(status: str, stage: int) -> str:
        return json.dumps({"variant": "deepspeed", "task": {"zero_stage": stage}, "nodes": 2, "world_size": 2,
                           "status": status})

    (folder / "results.jsonl").write_text("\n".join([row("timeout", 1), row("ok", 2), row("ok", 3)]) + "\n")
    (folder / "console.log").write_text("")
    driver = soak.Soak(tmp_path, 40, None, None)
    with pytest.raises(SystemExit, match="left a planned run without an ok row"):
        soak.reference(driver, setup)
    [aside] = [p for p in (tmp_path / "reference").iterdir() if p.is_dir()]
    assert aside.name.startswith("deepspeed-two-fake-nodes-files.failed-")
    folder.mkdir()
    (folder / "results.jsonl").write_text("\n".join(row("ok", stage) for stage in (1, 2, 3)) + "\n")
    (folder / "console.log").write_text("")
    assert sorted(soak.reference(driver, setup)) == [("deepspeed", stage, 2, 2) for stage in (1, 2, 3)]


def test_drivers_that_share_a_references_folder_train_each_setup_once(tmp_path, monkeypatch):
    """Two drivers at once: the second waits for the first's undisturbed sweep and takes its figures."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    trained = []

    def undisturbed(_, folder, setup, port, *extra):
        trained.append(folder)
        time.sleep(0.5)  # the other driver asks meanwhile
        folder.mkdir(parents=True)
        (folder / "results.jsonl").write_text(json.dumps({"variant": setup.variant, "nodes": 1, "world_size": 2,
                                                          "status": "ok", "test_loss": 0.5}) + "\n")
        return []

    monkeypatch.setattr(soak, "start", undisturbed)
    setup = soak.Setup("torch-ddp", "one node", "memory")
    drivers = [soak.Soak(tmp_path / f"seed-{seed}", 40, None, None, tmp_path / "reference") for seed in (1, 2)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        figures = list(pool.map(lambda driver: soak.reference(driver, setup), drivers))
    assert trained == [tmp_path / "reference" / "torch-ddp-one-node-memory"]
    assert figures[0] == figures[1] == {("torch-ddp", None, 1, 2): json.loads(
        (trained[0] / "results.jsonl").read_text())}


def test_an_undisturbed_sweep_stopped_before_its_end_is_trained_again(tmp_path, monkeypatch):
    """A driver stopped while it trained a reference leaves some rows and no console: taken as it is, a sweep of
    three ZeRO stages with only the first done would pass for a reference of one run."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    import soak

    def row(stage: int) -> str:
        return json.dumps({"variant": "deepspeed", "task": {"zero_stage": stage}, "nodes": 1, "world_size": 2,
                           "status": "ok"})

    def undisturbed(_, folder, setup, port, *extra):
        folder.mkdir(parents=True)
        (folder / "results.jsonl").write_text("\n".join(row(stage) for stage in (1, 2, 3)) + "\n")
        return []

    monkeypatch.setattr(soak, "start", undisturbed)
    setup = soak.Setup("deepspeed", "one node", "memory")
    stopped = tmp_path / "reference" / setup.name
    stopped.mkdir(parents=True)
    (stopped / "results.jsonl").write_text(row(1) + "\n")
    assert sorted(soak.reference(soak.Soak(tmp_path, 40, None, None), setup)) == [
        ("deepspeed", stage, 1, 2) for stage in (1, 2, 3)]
