"""A hung run's stacks: each process of a rank, forked children included, writes its threads' Python stacks to
a file of its own when the harness asks, and the harness names where each main thread waited."""
import os
import subprocess
import sys
import textwrap

import psutil
import pytest

from bench.run import stacks

SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from bench.worker import stacks

    def wait_here(who):
        os.write(1, f"{who}\\n".encode())  # one write: the two processes share the pipe
        time.sleep(600)

    stacks.write_on_signal(Path(sys.argv[1]), "earlier")  # a process that made a Worker before (a test, an engine)
    stacks.write_on_signal(Path(sys.argv[1]), "rank0")
    child = os.fork()  # as a DataLoader worker is forked from its rank: it registers as fork returns
    wait_here(f"child {os.getpid()}" if child == 0 else "rank")
""")
# A launcher that catches the signal for its own ends (torchrun can): it must never be sent it.
LAUNCHER = textwrap.dedent("""
    import signal, subprocess, sys
    from pathlib import Path
    signal.signal(signal.SIGUSR1, lambda *_: Path(sys.argv[1]).write_text("signalled"))
    subprocess.run([sys.executable, *sys.argv[2:]])
""")


def test_a_rank_and_its_forked_child_each_say_where_they_waited(tmp_path):
    script, launcher, marker = tmp_path / "rank.py", tmp_path / "launcher.py", tmp_path / "launcher-signalled"
    script.write_text(SCRIPT)
    launcher.write_text(LAUNCHER)
    rank = subprocess.Popen([sys.executable, str(launcher), str(marker), str(script), str(tmp_path)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(stacks.REPO_ROOT)})
    try:
        started = sorted(rank.stdout.readline().split() for _ in range(2))
        assert started[1] == ["rank"]
        child = started[0][1]
        assert stacks.ask([rank.pid], tmp_path) == 2
        waited = stacks.where_they_waited(tmp_path)
    finally:
        subprocess.run(["pkill", "-9", "-s", str(rank.pid)])
        rank.wait()
        rank.stdout.close()
    assert sorted(line.split(":")[0] for line in waited) == ["rank0", f"rank0-child{child}"]
    assert all(" in wait_here (" in line and "rank.py:" in line for line in waited), waited
    assert not marker.exists()
    registered = [line.split(" ", 2)[2] for line in
                  (tmp_path / stacks.STACKS_DIR / stacks.REGISTRY).read_text().splitlines()]
    assert registered == ["earlier", "rank0", f"rank0-child{child}"]  # one fork hook, however many registrations


LOADER_RANK = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from torch.utils.data import DataLoader, Dataset

    class Waits(Dataset):
        def __len__(self):
            return 1

        def __getitem__(self, index):
            os.write(1, f"child {os.getpid()}\\n".encode())
            time.sleep(600)

    if __name__ == "__main__":
        from bench.worker import stacks
        from torch_impl import data

        stacks.write_on_signal(Path(sys.argv[1]), "rank0")
        loader = DataLoader(Waits(), batch_size=None, **data.loader_options(Waits(), workers=1, pin_memory=False))
        os.write(1, b"rank\\n")
        next(iter(loader))
""")


@pytest.mark.slow  # its loader's forkserver imports torch and torchvision: 7 s
def test_a_loader_worker_from_the_forkserver_says_where_it_waited_and_ends_with_its_rank(tmp_path):
    """The worker's parent is the forkserver, not the rank: it registers for its stacks itself, and a killed rank
    takes its workers and the server with it (torch's own check watches the parent)."""
    script = tmp_path / "rank.py"
    script.write_text(LOADER_RANK)
    rank = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(stacks.REPO_ROOT)})
    try:
        started = sorted(rank.stdout.readline().split() for _ in range(2))
        assert started[1] == ["rank"]
        worker = started[0][1]
        assert stacks.ask([rank.pid], tmp_path) == 2  # the rank and its worker; never the forkserver between them
        waited = stacks.where_they_waited(tmp_path)
        under_rank = [p.pid for p in psutil.Process(rank.pid).children(recursive=True)]
        assert int(worker) in under_rank and len(under_rank) >= 2  # the server, and the worker it forked
        rank.kill()
        rank.wait()
        gone, alive = psutil.wait_procs([psutil.Process(pid) for pid in under_rank if psutil.pid_exists(pid)],
                                        timeout=20)
        assert alive == [], [p.cmdline() for p in alive]
    finally:
        subprocess.run(["pkill", "-9", "-s", str(rank.pid)])
        rank.stdout.close()
    assert sorted(line.split(":")[0] for line in waited) == ["rank0", f"rank0-child{worker}"]
    assert any(line.startswith(f"rank0-child{worker}: in __getitem__ (") for line in waited), waited


def test_files_of_processes_never_asked_are_removed_and_an_empty_folder_with_them(tmp_path):
    folder = tmp_path / stacks.STACKS_DIR
    folder.mkdir()
    (folder / "rank0.txt").write_text("")
    (folder / "rank1.txt").write_text("")
    stacks.remove_unused(tmp_path)
    assert not folder.exists()
    folder.mkdir()
    (folder / "rank0.txt").write_text('Thread 0x01 (most recent call first):\n  File "x.py", line 3 in f\n')
    (folder / "rank1.txt").write_text("")
    stacks.remove_unused(tmp_path)
    assert [p.name for p in folder.iterdir()] == ["rank0.txt"]
    assert stacks.where_they_waited(tmp_path) == ["rank0: in f (x.py:3)"]


def test_only_this_hosts_registrations_count(tmp_path):
    """A run folder on a shared file system holds every host's registrations: a pid of another host's rank may
    be a process of this one."""
    import socket

    folder = tmp_path / stacks.STACKS_DIR
    folder.mkdir()
    here = socket.gethostname()
    (folder / stacks.REGISTRY).write_text(f"101 {here} rank0\n102 elsewhere rank1\n103 {here} rank0-child103\n"
                                          f"101 {here} rank2\n")
    assert stacks._registered(tmp_path) == {101: "rank2", 103: "rank0-child103"}  # a pid's last registration
