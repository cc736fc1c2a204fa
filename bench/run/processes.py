"""Starting a run's processes, waiting for them with a timeout, and killing every one of them.

One process group per launcher invocation. A run that crashes, hangs or is interrupted has every
process it started killed, found by the run id in their environment, so that even processes that
started their own sessions (torchrun's workers) are caught. Each process the harness starts dies with
the harness (PR_SET_PDEATHSIG); the run's watchdog (`bench.run.reaper`) catches the rest.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

from bench import REPO_ROOT
from bench.interrupt import die_with, held
from bench.run import stacks
from bench.status import Status
from bench.worker import LAUNCH_TIME_ENV

RUN_ID_ENV = "DTBENCH_RUN_ID"
LOG_TAIL_LINES = 12


@dataclass(frozen=True)
class Process:
    """One process the harness starts: a node's launcher, or (tf-config, tf-ps) one TF task."""
    command: list[str]
    env: dict[str, str]
    log_name: str
    files: tuple[tuple[str, str], ...] = ()  # (path, content) written before it starts (a launcher's config)
    # A server that never exits by itself (a tf-ps worker or parameter server): the run is over when every
    # other process has exited, and it is killed then; its death before that fails the run.
    server: bool = False
    # Files its processes leave outside the run's folder, as glob patterns, removed when the run ends:
    # DeepSpeed's CPU all-reduce segments in /dev/shm (66 MB a rank, in RAM) are never unlinked by DeepSpeed.
    leftovers: tuple[str, ...] = ()


def python_path() -> str:
    """PYTHONPATH for a child of the harness: the repo first, then whatever the caller had."""
    return os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)


def start(processes: list[Process], run_dir: Path, launch_time: float) -> tuple[list[subprocess.Popen], list[Path]]:
    """Each in a session of its own, output to its log in the run directory."""
    procs, logs = [], []
    for p in processes:
        for path, content in p.files:
            Path(path).write_text(content)
        logs.append(run_dir / p.log_name)
        procs.append(spawn(p.command, {**p.env, LAUNCH_TIME_ENV: repr(launch_time)}, logs[-1]))
    return procs, logs


def spawn(command: list[str], env: dict[str, str], log: Path, **popen) -> subprocess.Popen:
    """A child of the harness in a session of its own (a terminal's Ctrl-C is the harness's to handle),
    output to its log, killed by the kernel if the harness dies first."""
    with open(log, "wb") as log_file:
        return subprocess.Popen(command, env={**os.environ, **env}, cwd=REPO_ROOT, stdout=log_file,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=die_with(os.getpid()), **popen)


# Once every rank has recorded its result, its processes get this long to exit; what still runs then is
# stopped, the run ok: a process's teardown is not the run's (TensorFlow's tf.data iterator, destroyed, waits out
# its autotuner's sleep, tens of seconds; docs/methodology.md#where-a-runs-wall-time-goes). A quarter of a second:
# a torch rank's interpreter exit alone took 1.6 s here, which a longer grace only waited out before the kill.
RESULT_GRACE_S = 0.25


def wait(procs: list[subprocess.Popen], started: float, timeout_s: float,
         logs: list[Path], servers: frozenset[int] = frozenset(),
         stop: Callable[[bool], tuple[str, str | None] | None] = lambda done: None,
         reported: Callable[[], bool] = lambda: False) -> tuple[str, str | None]:
    """Wait for every process (but the `servers`, by index); stop at the first failure, at the timeout, when
    `stop(whether the non-servers are done)` says how the run ended (a multi-host run's other hosts), or
    RESULT_GRACE_S after `reported()` first said every rank has recorded its result: (ok | failed | timeout,
    reason; for an ok run, which processes were still running then). A host that runs only servers waits for
    `stop` or the timeout."""
    trains = [i for i in range(len(procs)) if i not in servers]
    reported_at = None
    while True:
        codes = [p.poll() for p in procs]
        # A process killed by a signal is the likelier root cause than one that failed after it.
        failed = sorted(((i, c) for i, c in enumerate(codes) if c not in (None, 0)), key=lambda ic: ic[1] > 0)
        if failed:
            index, code = failed[0]
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            return Status.FAILED, f"{logs[index].stem} {how}:\n{tail(logs[index])}"
        done = all(codes[i] == 0 for i in trains)
        if done and trains:
            return Status.OK, None
        ended = stop(done)
        if ended is not None:
            return ended
        if reported_at is None and reported():
            reported_at = time.time()
        if reported_at is not None and time.time() - reported_at > RESULT_GRACE_S:
            running = ", ".join(logs[i].stem for i in trains if codes[i] is None)
            return Status.OK, f"{running} still running {RESULT_GRACE_S:g} s after every rank's result: stopped"
        if time.time() - started > timeout_s:
            waiting = [i for i, c in enumerate(codes) if c is None and i not in servers] or list(servers)
            names, last_lines = ", ".join(logs[i].stem for i in waiting), tail(logs[waiting[0]])
            stacks.ask([procs[i].pid for i in waiting], logs[0].parent)
            waited = stacks.where_they_waited(logs[0].parent)
            where = f"; where each process waited (stacks/ in the run folder): {'; '.join(waited)}" if waited else ""
            return Status.TIMEOUT, (f"no result within the {timeout_s:.0f}s timeout; {names} still running, "
                               f"all killed{where}:\n{last_lines}")
        time.sleep(0.2)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def processes_of_run(run_id: str) -> list[int]:
    """Every live process whose environment carries this run id."""
    marker = f"{RUN_ID_ENV}={run_id}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def kill_run(run_id: str, procs: list[subprocess.Popen]) -> None:
    """SIGKILL every process of the run: TF workers ignore SIGTERM, torchrun's children have own sessions.
    A second Ctrl-C waits until this is done."""
    with held():
        for proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        kill_all_of_run(run_id)
        for proc in procs:
            proc.wait()


def kill_all_of_run(run_id: str, sweeps: int = 5) -> None:
    """SIGKILL every live process carrying the run id, sweeping again while a dying parent may still fork."""
    for _ in range(sweeps):
        pids = processes_of_run(run_id)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
