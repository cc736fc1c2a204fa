"""A run's watchdog: whatever ends the harness, no process of the run outlives it, and the run is recorded.

The harness starts this small process in a session of its own, handing it the read end of a pipe whose
only write end the harness keeps. When the harness ends (a clean finish, Ctrl-C, SIGKILL, the OOM killer)
the kernel closes that end, this process reads EOF and kills every process whose environment carries the
run id: torchrun's workers and an engine's executors too, which live outside the harness's process tree.
The harness says on the pipe when the run's processes have `ended`, and that it lets the watchdog go
(`released`) once it has appended the run's own row. Until then the watchdog keeps the run's row, `interrupted`,
which the harness wrote beside the run before launching it: where the pipe closes without `released`, the
harness died with its run in flight, or after it and before its row was stored, and the watchdog appends that
row with the reason, unless the store holds a row of the run already (the harness killed between appending its
own and letting go).

    python -m bench.run.reaper --fd FD --run-id RUN_ID [--row ROW.json --store results.jsonl]
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench import REPO_ROOT
from bench.run.processes import kill_all_of_run, processes_of_run, python_path
from bench.spec.setting import parse, setting

ENDED = b"ended"  # the run's processes are gone; its row is not stored yet
RELEASED = b"released"  # its row is stored (or the harness reports it itself): nothing left to record
SEMAPHORE_LOOK_S = 2.0  # one scan of /proc: well under a millisecond
HARNESS_DIED = ("the harness ended with this run in flight (killed outright: SIGKILL, the OOM killer; or crashed): "
                "its watchdog killed the run's processes and recorded it")
DIED_AFTER_THE_RUN = ("the harness ended after this run's processes had, before storing its row (killed outright: "
                      "SIGKILL, the OOM killer; or crashed): its watchdog recorded it; what its ranks reported is in "
                      "the run's folder")


class Reaper:
    """The harness's side: start the watchdog for one run, say when the run's processes have ended, and let it
    go once the run's row is stored."""

    def __init__(self, run_id: str, row: Path | None = None, store: Path | None = None):
        """`row`: the run's row should the harness die (a JSON file), appended to `store` if it does."""
        self._row = row
        recording = ["--row", str(row), "--store", str(store)] if row and store else []
        read_end, self._write_end = os.pipe()  # the write end is not inherited by any child
        try:
            # Without the run id in its environment: its own sweep must not find it. SIGINT ignored from its
            # first instruction (Python keeps an inherited SIG_IGN): one during its imports would kill it with a
            # traceback on the harness's console.
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "bench.run.reaper", "--fd", str(read_end), "--run-id", run_id, *recording],
                pass_fds=[read_end], cwd=REPO_ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": python_path()},
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        finally:
            os.close(read_end)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def ended(self) -> None:
        """The run's processes were killed; its row is not stored yet: the watchdog keeps the row it was left,
        to append should the harness die before `release`."""
        self._say(ENDED)

    def release(self, within_s: float = 10) -> None:
        """The run is over, its processes were killed and its row is stored (or the harness reports why not):
        the watchdog sweeps once more and exits; one that has not within `within_s` (stopped, or stuck) is
        killed, so that nothing of the run outlives it."""
        try:
            self._say(RELEASED)
        finally:
            os.close(self._write_end)
        if self._row:
            self._row.unlink(missing_ok=True)
        try:
            self._proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _say(self, word: bytes) -> None:
        try:
            os.write(self._write_end, word)
        except BrokenPipeError:  # the watchdog is gone already (killed): nothing is left to tell
            pass


@dataclass(frozen=True)
class ReaperArgs:
    fd: int = field(default=-1, metadata=setting(required=True))
    run_id: str = field(default="", metadata=setting(required=True))
    row: Path | None = field(default=None, metadata=setting())
    store: Path | None = field(default=None, metadata=setting())


def main(argv: list[str] | None = None) -> int:
    args = parse(ReaperArgs, argv, __doc__.splitlines()[0])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as Reaper starts it; a terminal's Ctrl-C is the harness's
    said, semaphores = b"", set()
    while True:
        # Noted while the run lives: on a SIGKILLed harness its children (parent-death signal) may be gone
        # before this wakes, and their semaphores with no one left to name them.
        if not select.select([args.fd], [], [], SEMAPHORE_LOOK_S)[0]:
            semaphores |= named_semaphores(processes_of_run(args.run_id))
        elif chunk := os.read(args.fd, 4096):
            said += chunk
        else:
            break
    semaphores |= named_semaphores(processes_of_run(args.run_id))
    kill_all_of_run(args.run_id)
    for path in Path("/dev/shm").glob("sem.*"):  # the resource tracker that would have removed them was killed too
        with contextlib.suppress(OSError):
            if path.stat().st_ino in semaphores:
                path.unlink()
    if not said.endswith(RELEASED) and args.row and args.store:
        record(args.row, args.store, DIED_AFTER_THE_RUN if said == ENDED else None)
    return 0


def named_semaphores(pids: list[int]) -> set[int]:
    """The inodes of the named POSIX semaphores (/dev/shm/sem.*) these processes map: a spawn-context
    multiprocessing lock or queue (Dask's workers) makes one, and only its process's resource tracker removes it.
    The map names the file glibc made it as, since renamed: the inode is what still matches."""
    inodes = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith("/dev/shm/sem."):
                inodes.add(int(fields[4]))
    return inodes


def partial(row: Path) -> Path:
    """Where the harness writes the row before moving it into place: the row is there whole, or not at all."""
    return row.with_name(f"{row.name}.partial")


def record(row: Path, store: Path, error: str | None = None) -> None:
    """The row the harness left for this (its error replaced by `error`), appended to its store unless a row of
    the run is there already (the harness stored its own, then died before letting go); none where it cannot be
    (a full disk): the folder then holds the run without a row, as a harness that died there would have left it
    anyway. No row at all: the harness died between making the run's folder and its row, before anything else
    went in, so the folder goes too (a folder without its row would read as a run lost)."""
    from bench.results.store import ResultStore, StoreError

    if not row.exists():
        with contextlib.suppress(OSError):
            partial(row).unlink(missing_ok=True)
            row.parent.rmdir()  # only if empty: never a folder the run had written into
        return
    try:
        doc = json.loads(row.read_text())
        ResultStore(store.parent).append({**doc, "error": error or doc.get("error")}, once=True)
        row.unlink()
    except (OSError, ValueError, StoreError):
        pass

if __name__ == "__main__":
    sys.exit(main())
