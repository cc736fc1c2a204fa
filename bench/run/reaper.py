"""A run's watchdog: whatever ends the harness, no process of the run outlives it.

The harness starts this small process in a session of its own, handing it the read end of a pipe whose
only write end the harness keeps. When the harness ends (a clean finish, Ctrl-C, SIGKILL, the OOM killer)
the kernel closes that end, this process reads EOF and kills every process whose environment carries the
run id: torchrun's workers and an engine's executors too, which live outside the harness's process tree.

    python -m bench.run.reaper --fd FD --run-id RUN_ID
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

from bench import REPO_ROOT
from bench.run.processes import kill_all_of_run, python_path


class Reaper:
    """The harness's side: start the watchdog for one run, and let it go when the run is over."""

    def __init__(self, run_id: str):
        read_end, self._write_end = os.pipe()  # the write end is not inherited by any child
        try:
            # Without the run id in its environment: its own sweep must not find it. SIGINT ignored from its
            # first instruction (Python keeps an inherited SIG_IGN): one during its imports would kill it with a
            # traceback on the harness's console.
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "bench.run.reaper", "--fd", str(read_end), "--run-id", run_id],
                pass_fds=[read_end], cwd=REPO_ROOT, start_new_session=True, stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": python_path()},
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        finally:
            os.close(read_end)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def release(self, within_s: float = 10) -> None:
        """The run is over and its processes were killed: the watchdog sweeps once more and exits; one that has
        not within `within_s` (stopped, or stuck) is killed, so that nothing of the run outlives it."""
        os.close(self._write_end)
        try:
            self._proc.wait(timeout=within_s)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--run-id", required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as Reaper starts it; a terminal's Ctrl-C is the harness's
    while os.read(args.fd, 4096):
        pass
    kill_all_of_run(args.run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
