"""What the tests share: running `python -m bench` as a user would, reading a results folder, and
building result rows with fixed figures."""
from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings
from pathlib import Path

import pytest

from bench.results import ResultRow

REPO = Path(__file__).resolve().parent.parent
CPU = {"CUDA_VISIBLE_DEVICES": ""}  # a CPU run even where GPUs are visible
# The default task in an epoch of 40 steps, 3 windows timed: the evaluation still reads every test image.
SHORT = ("--steps-per-epoch", "40", "--warmup-steps", "4", "--window-steps", "8", "--windows", "3")


def bench(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m bench ARGS` as a user would, from the repo root."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


class StartedARun(AssertionError):
    """A command run by cli() got as far as starting a run."""


_PARSERS: dict[str, object] = {}


def _parser_built_once(build):
    """The command line's parser, built once a process for each name it shows (60 ms a build, ~370 calls)."""
    import bench

    def parser():
        name = bench.command()
        if name not in _PARSERS:
            _PARSERS[name] = build()
        return _PARSERS[name]
    return parser


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`bench(*args)` inside this process: for a command that starts no process of its own (a refusal, a report, a
    plan), where a subprocess's start and imports are most of the test. Its exit code, and what it printed, logged
    and warned, come back as `bench` returns them; the environment, directory, logging, signal handlers and boto3's
    default session are put back after. A command that gets as far as starting a run fails the test: use bench()."""
    from bench import cli as command_line
    from bench.interrupt import STOP_SIGNALS
    from bench.run import execute
    from bench.sweep import runner

    def no_run(*_, **__):
        raise StartedARun(f"`bench {' '.join(args)}` started a run inside the test's process: call bench()")

    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    saved_logging = (root.handlers[:], root.level, {name: logging.getLogger(name).level
                                                    for name in ("bench", *command_line.CHATTY_LOGGERS)})
    saved_signals = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    # boto3's default session caches the credentials of the environment it first saw: none after, as before
    saved_session = sys.modules["boto3"].DEFAULT_SESSION if "boto3" in sys.modules else None
    try:
        with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings(record=True) as caught:
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            patch.chdir(REPO)
            patch.setattr(runner, "run_all", no_run)
            patch.setattr(execute, "execute", no_run)
            patch.setattr(command_line, "build_parser", _parser_built_once(command_line.build_parser))
            warnings.simplefilter("default")  # a fresh interpreter's filters: these four it does not show
            for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                warnings.simplefilter("ignore", hidden)
            root.handlers = []  # so that main's basicConfig logs to this call's stderr, as a fresh process's would
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = command_line.main(list(args)) or 0
                except SystemExit as exit_:  # argparse's refusals
                    code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                except StartedARun:
                    raise
                except Exception:  # noqa: BLE001 - what the interpreter would print, and its exit status
                    traceback.print_exc()
                    code = 1
            err.writelines(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    except BaseException:
        sys.__stderr__.write(out.getvalue() + err.getvalue())  # what it printed before the test stopped
        raise
    finally:
        root.handlers, root.level = saved_logging[0], saved_logging[1]
        for name, level in saved_logging[2].items():
            logging.getLogger(name).setLevel(level)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)
        if "boto3" in sys.modules:
            sys.modules["boto3"].DEFAULT_SESSION = saved_session
    if code - 128 in STOP_SIGNALS and "interrupted by" in err.getvalue():
        os.kill(os.getpid(), code - 128)  # a Ctrl-C during the call stops the session, as it would have
    return subprocess.CompletedProcess(["bench", *args], code, out.getvalue(), err.getvalue())


def bench_with_own_shm(*args: str, env: dict | None = None, timeout: float = 600
                       ) -> tuple[subprocess.CompletedProcess, list[str] | None]:
    """`bench(*args)` with a /dev/shm of its own (a mount namespace over a fresh tmpfs, so that no other test's files
    mix in), and what it left there once it ended: named semaphores, shared-memory segments. None (run as `bench`
    does) where namespaces need the root this user lacks."""
    return with_own_shm([sys.executable, "-m", "bench", *args], env=env, timeout=timeout)


def with_own_shm(argv: list[str], env: dict | None = None, timeout: float = 600, cwd: Path = REPO
                 ) -> tuple[subprocess.CompletedProcess, list[str] | None]:
    """`argv` run as `bench_with_own_shm` runs the harness: a /dev/shm of its own, and what it left there."""
    if os.geteuid() != 0:
        return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})},
                              timeout=timeout), None
    with tempfile.TemporaryDirectory(prefix="dtbench-shm-") as listing:
        left = Path(listing) / "left"
        script = ('mount -t tmpfs -o mode=1777 dtbench-shm /dev/shm || exit 99; "$@"; status=$?; '
                  f'ls -A /dev/shm > {left}; exit $status')
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
                               *argv], cwd=cwd, capture_output=True, text=True,
                              env={**os.environ, **(env or {})}, timeout=timeout)
        assert done.returncode != 99, f"no tmpfs on a private /dev/shm: {done.stderr}"
        return done, left.read_text().split()


def rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def configurations(out: Path, figure: str) -> tuple[list, list]:
    """(run keys, one derived figure) of a results folder's configurations, as its report derives them."""
    from bench.results import load, peak
    from bench.analysis import aggregate

    configs = aggregate.configurations(load(out), peak.load(out))
    return list(configs["key"]), list(configs[figure])


def result_row(variant: str = "torch-ddp", world: int = 1, median: float | None = 1000.0, **fields) -> ResultRow:
    """An ok row of `variant` on `world` CPU slots (one node) with throughput `median`; `fields` override."""
    row = dict(run_id=f"{variant}-{world}", started_at="t", status="ok", variant=variant,
               framework="tensorflow-cpu" if variant.startswith("tf-") else "torch", launcher="torchrun",
               engine="torchrun" if variant in ("torch-ddp", "accelerate") else "local", device_type="cpu",
               nodes=1, devices_per_node=world, world_size=world, task={"name": "quick", "global_batch": 64},
               throughput=None if median is None else {"median": median, "ci_low": median, "ci_high": median})
    return ResultRow(**{**row, **fields})

