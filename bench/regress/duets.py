"""A/B on one machine: the current tree against a git revision, each run a fresh process.

Both sides share the machine, as in asv's `continuous`, which keeps machine-to-machine noise out.
On top of that, the two sides' runs are started together as a duet and take turns window by
window (`bench.worker.turns`), so that the machine's drift from one second to the next hits both alike;
who goes first alternates from duet to duet. A revision older than turn-taking falls back to runs
one after the other (A B, B A, ...). The revision is checked out in a temporary git worktree and
uses this environment when its dependencies match (else it sets up its own venv).
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Iterator

from bench import REPO_ROOT
from bench.results import ResultRow
from bench import interrupt
from bench.spec.task import SpecError
from bench.worker import turns

log = logging.getLogger(__name__)


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="dtbench-ab-")) / "tree"
    made = subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=REPO_ROOT,
                          capture_output=True, text=True)
    if made.returncode != 0:
        raise SpecError(f"cannot check out {rev!r}: {made.stderr.strip().splitlines()[-1]}: name a commit or branch")
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO_ROOT, capture_output=True)


def dependencies(root: Path) -> tuple:
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return project.get("dependencies", []), project.get("optional-dependencies", {})


def python_for(tree: Path) -> str:
    """This interpreter when the revision pins the same dependencies; else the revision's own venv."""
    if dependencies(tree) == dependencies(REPO_ROOT):
        return sys.executable
    log.info("the revision's dependencies differ: setting up its own venv in %s", tree / ".venv")
    subprocess.run(["make", "-C", str(tree), "packages"], check=True)
    return str(tree / ".venv" / "bin" / "python")


def supports_turns(tree: Path) -> bool:
    # Where turn-taking lived then, and lives now.
    return (tree / "bench" / "turns.py").exists() or (tree / "bench" / "worker" / "turns.py").exists()


def start_run(python: str, tree: Path, args: list[str], out: Path, env: dict[str, str]) -> subprocess.Popen:
    """One `bench run` in a fresh process; a failed run is recorded as a failed row by the harness. OUT is made
    absolute: the run starts in its side's tree, where a relative --out (the default's) is a folder of that
    temporary worktree, deleted with it."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench-run.log", "ab") as log_file:
        # SIGTERM, not SIGKILL, if this harness dies first: the run records its row and stops its ranks itself.
        return subprocess.Popen([python, "-m", "bench", "run", *args, "--out", str(out)], cwd=tree,
                                env={**os.environ, **env}, stdout=log_file, stderr=subprocess.STDOUT,
                                preexec_fn=interrupt.die_with(os.getpid(), signal.SIGTERM))


def check_started(proc: subprocess.Popen, out: Path) -> None:
    """Exit code 2 is bad input (nothing recorded): stop the whole comparison with its one line."""
    if proc.returncode == 2:
        last = (out / "bench-run.log").read_text().strip().splitlines()[-1]
        raise SpecError(last.removeprefix("error: "))


def run_once(python: str, tree: Path, args: list[str], out: Path) -> None:
    proc = start_run(python, tree, args, out, {})
    with interrupt.stopped_if_we_stop([proc]):
        proc.wait()
    check_started(proc, out)


def duets(sides: dict[str, tuple[str, Path]], runs: list[list[str]], repeats: int, out: Path) -> None:
    """`repeats` duets of each run: both sides started together, taking turns window by window."""
    names = list(sides)
    for i in range(repeats):
        first = i % 2  # whoever goes first (and starts first) alternates
        for args in runs:
            log.info("[%d/%d] duet, %s first: bench run %s", i + 1, repeats, names[first], " ".join(args))
            with turns.baton(first) as baton:
                procs: dict[int, subprocess.Popen] = {}
                with interrupt.stopped_if_we_stop(procs.values()):
                    for side in (first, 1 - first):
                        procs[side] = start_run(*sides[names[side]], args, out / names[side], baton.environment(side))
                    baton.wait(procs)
            for side, proc in procs.items():
                check_started(proc, out / names[side])


def interleaved(sides: dict[str, tuple[str, Path]], runs: list[list[str]], repeats: int, out: Path) -> None:
    """A B, B A, A B ...: whatever favours the first (or second) run of a pair hits both sides alike."""
    names = list(sides)
    for i in range(repeats):
        for name in (names if i % 2 == 0 else names[::-1]):
            python, tree = sides[name]
            for args in runs:
                log.info("[%d/%d] %s: bench run %s", i + 1, repeats, name, " ".join(args))
                run_once(python, tree, args, out / name)


def against(rev: str, runs: list[list[str]], repeats: int, out: Path) -> tuple[Path, Path, bool]:
    """Run the chosen runs for REV (baseline) and the current tree; return both stores, and whether
    their runs are paired duets (else interleaved one after the other)."""
    with worktree(rev) as tree:
        sides = {"baseline": (python_for(tree), tree), "current": (sys.executable, REPO_ROOT)}
        paired = supports_turns(tree)
        if paired:
            duets(sides, runs, repeats, out)
        else:
            log.warning("%s predates turn-taking: its runs and ours run one after the other, which is "
                        "noisier on a shared machine", rev)
            interleaved(sides, runs, repeats, out)
    return out / "baseline", out / "current", paired


def split_groups(a: list[ResultRow], b: list[ResultRow], groups: int,
                 repeats: int) -> list[tuple[list[ResultRow], list[ResultRow]]]:
    """Two sides' duets dealt into `groups` A/A comparisons of `repeats` consecutive duets each."""
    return [(a[g * repeats:(g + 1) * repeats], b[g * repeats:(g + 1) * repeats]) for g in range(groups)]
