"""A/B on one machine: the current tree against a git revision, interleaved, each run a fresh process.

This is how asv's `continuous` avoids machine-to-machine noise: both sides share the machine and
its drifts, one run of each after the other. The revision is checked out in a temporary git
worktree and uses this environment when its dependencies match (else it sets up its own venv).
"""
from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Iterator

from bench.launch import REPO_ROOT
from bench.results import ResultRow
from bench.task import SpecError

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


def run_once(python: str, tree: Path, args: list[str], out: Path) -> None:
    """One `bench run` in a fresh process; a failed run is recorded as a failed row by the harness."""
    result = subprocess.run([python, "-m", "bench", "run", *args, "--out", str(out)], cwd=tree,
                            capture_output=True, text=True)
    if result.returncode == 2:
        raise SpecError(result.stderr.strip().splitlines()[-1].removeprefix("error: "))


def interleaved(sides: dict[str, tuple[str, Path]], runs: list[list[str]], repeats: int, out: Path) -> None:
    """A B, B A, A B ...: whatever favours the first (or second) run of a pair hits both sides alike."""
    names = list(sides)
    for i in range(repeats):
        for name in (names if i % 2 == 0 else names[::-1]):
            python, tree = sides[name]
            for args in runs:
                log.info("[%d/%d] %s: bench run %s", i + 1, repeats, name, " ".join(args))
                run_once(python, tree, args, out / name)


def against(rev: str, runs: list[list[str]], repeats: int, out: Path) -> tuple[Path, Path]:
    """Run the chosen runs for REV (baseline) and the current tree, interleaved; return both stores."""
    with worktree(rev) as tree:
        interleaved({"baseline": (python_for(tree), tree), "current": (sys.executable, REPO_ROOT)},
                    runs, repeats, out)
    return out / "baseline", out / "current"


def split_groups(rows: list[ResultRow], groups: int, repeats: int) -> list[tuple[list[ResultRow], list[ResultRow]]]:
    """Consecutive runs of one tree dealt into A/A comparisons: group g's A and B alternate run by run."""
    pairs = []
    for g in range(groups):
        chunk = rows[g * 2 * repeats:(g + 1) * 2 * repeats]
        pairs.append((chunk[0::2], chunk[1::2]))
    return pairs
