"""A request that names a model of a library or the user's own (bench.spec.models) builds it once, in a process of
its framework, before anything starts: a name the library lacks, a size the model refuses or a module that fails
is a one-line error, not a failed rank minutes later."""
from __future__ import annotations

import json
import subprocess
import sys

from bench import REPO_ROOT
from bench.spec import models
from bench.spec.task import SpecError, TaskSpec
from bench.spec.variants import MODEL_CHECK

TIMEOUT_S = 300


def check(task: TaskSpec) -> str | None:
    """The framework of the task's model ("torch", "tensorflow"), built once to be sure; None for a model both
    frameworks build (built in, or named for both: their pinned libraries have it)."""
    name = models.parse(task.model)
    if name.framework is None and name.source != models.OWN:
        return None
    framework = name.framework
    if framework is None:  # the user's module: its framework is what it returns
        framework = _run(["-m", "bench.spec.models", name.name, str(task.channels), str(task.classes),
                          str(task.image_size)])["framework"]
    _run(["-m", MODEL_CHECK[framework], json.dumps(task.to_dict())])
    return framework


def _run(args: list[str]) -> dict:
    done = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(f"the model could not be built: {tail}") from None
    if "error" in answer:
        raise SpecError(answer["error"])
    return answer
