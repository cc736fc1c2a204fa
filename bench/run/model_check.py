"""A request that names a model of a library or the user's own (bench.spec.models) builds it once, in a process of
its framework, before anything starts: a name the library lacks, a size the model refuses or a module that fails
is a one-line error, not a failed rank minutes later."""
from __future__ import annotations

import json
import os
import subprocess

from bench import REPO_ROOT
from bench.spec import models
from bench.spec import frameworks
from bench.spec.task import SpecError, TaskSpec

TIMEOUT_S = 300


def check(task: TaskSpec, variants=()) -> str | None:
    """The family of the task's model, built once to be sure; None for a model both frameworks build: a built-in
    one (always built), or one named for both, built by the framework of each of `variants` (the approaches about
    to train it) in turn. An approach whose framework is not installed is refused first, naming its extra."""
    if missing := next(filter(None, (v.not_installed() for v in variants)), None):
        raise SpecError(missing)
    name = models.parse(task.model.name)
    if name.framework is None and name.source != models.OWN:
        for framework in sorted({v.family for v in variants}) if name.library else ():
            _run(framework, ["-m", frameworks.get(framework).model_check, json.dumps(task.to_dict())])
        return None
    framework = name.framework
    if framework is None:  # the user's module: its framework is what it returns
        framework = _run(None, ["-m", "bench.spec.models", name.name, str(task.model.channels),
                                str(task.model.classes), str(task.model.image_size)])["framework"]
    _run(framework, ["-m", frameworks.get(framework).model_check, json.dumps(task.to_dict())])
    return framework


def _run(framework: str | None, args: list[str]) -> dict:
    """One build in the interpreter that framework's ranks run in, killed with the harness if it dies first."""
    from bench.run.interpreters import python_for
    from bench.run.processes import die_with

    python = python_for(framework)
    try:
        done = subprocess.run([python, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                              preexec_fn=die_with(os.getpid()))
    except subprocess.TimeoutExpired:
        raise SpecError(f"the model was not built within {TIMEOUT_S} s: check it builds in a Python of its "
                        "own, or name a smaller one") from None
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(f"the model could not be built: {tail}") from None
    if "error" in answer:
        raise SpecError(answer["error"])
    return answer
