"""`bench sweep --resume`: what a sweep stopped part-way (killed, interrupted, crashed) has left to run.

A planned run is done when the folder holds a finished row (`ok`, `skipped` as not applicable, or `does not fit`
the memory given) of the
same configuration (its run key), the same task settings and the same code revision; a configuration
planned R times (--repeats) needs R of them. Failed, timed-out and interrupted runs run again.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench import REPO_ROOT
from bench.results import ResultStore
from bench.results.key import config_key, settings_token
from bench.run.environment import git_sha
from bench.run.runspec import RunSpec
from bench.spec.task import SpecError
from bench.status import Status

FINISHED = (Status.OK, Status.SKIPPED, Status.DOES_NOT_FIT)  # the same run under the same memory would not fit again


def remaining(specs: list[RunSpec], out_dir: Path, allow_mixed_revisions: bool = False) -> list[RunSpec]:
    """The planned runs the folder does not hold yet, in the planned order."""
    done = Counter({key: len(rows) for key, rows in finished(out_dir, allow_mixed_revisions).items()})
    left = []
    for spec in specs:
        if done[identity(spec)]:
            done[identity(spec)] -= 1
        else:
            left.append(spec)
    return left


def finished(out_dir: Path, allow_mixed_revisions: bool = False) -> dict[tuple, list[dict]]:
    """The folder's finished rows by run identity (`identity`), each identity's in the order they were written.
    Rows of another code revision are refused in one line unless allowed."""
    revision = git_sha(REPO_ROOT)
    rows = ResultStore(out_dir).dicts()
    others = sorted({str(r.get("git_sha")) for r in rows} - {str(revision)})
    if others and not allow_mixed_revisions:
        raise SpecError(f"--resume: {out_dir} holds rows of revision {', '.join(others)}, this tree is {revision}: "
                        "resume from that revision, start a new --out, or pass --allow-mixed-revisions")
    by_identity: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["status"] in FINISHED and (allow_mixed_revisions or row.get("git_sha") == revision):
            by_identity.setdefault((config_key(row), settings_token(row["task"])), []).append(row)
    return by_identity


def identity(spec: RunSpec) -> tuple:
    """What makes a finished row a planned run's: its run key and its task's settings."""
    return spec.key, settings_token(spec.task.to_dict())

