"""`bench sweep --resume`: what a sweep stopped part-way (killed, interrupted, crashed) has left to run.

A planned run is done when the folder holds a finished row (`ok`, or `skipped` as not applicable) of the
same configuration (its run key), the same task settings and the same code revision; a configuration
planned R times (--repeats) needs R of them. Failed, timed-out and interrupted runs run again.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from bench import REPO_ROOT
from bench.results import ResultStore
from bench.results.key import config_key
from bench.run.environment import git_sha
from bench.run.runspec import RunSpec
from bench.spec.task import SpecError, TaskSpec

FINISHED = ("ok", "skipped")


def remaining(specs: list[RunSpec], out_dir: Path, allow_mixed_revisions: bool = False) -> list[RunSpec]:
    """The planned runs the folder does not hold yet, in the planned order."""
    revision = git_sha(REPO_ROOT)
    rows = ResultStore(out_dir).dicts()
    others = sorted({str(r.get("git_sha")) for r in rows} - {str(revision)})
    if others and not allow_mixed_revisions:
        raise SpecError(f"--resume: {out_dir} holds rows of revision {', '.join(others)}, this tree is {revision}: "
                        "resume from that revision, start a new --out, or pass --allow-mixed-revisions")
    done = Counter((config_key(r), _settings(r["task"])) for r in rows if r["status"] in FINISHED
                   and (allow_mixed_revisions or r.get("git_sha") == revision))
    left = []
    for spec in specs:
        key = (spec.key, _settings(spec.task.to_dict()))
        if done[key]:
            done[key] -= 1
        else:
            left.append(spec)
    return left


def _settings(task: dict) -> str:
    """The task's settings as the spec writes them (a row adds what it measured: params, per-device batch)."""
    # per_device_batch is in the run key already (a row writes it out, a strong spec leaves it None); a field
    # a row predates has its default
    fields = TaskSpec.__dataclass_fields__
    return repr(sorted((name, repr(task.get(name, fields[name].default))) for name in fields
                       if name != "per_device_batch"))
