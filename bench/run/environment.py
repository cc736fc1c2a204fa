"""The environment recorded with every row, gathered without importing any framework."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
import subprocess
from pathlib import Path

from bench import install
from bench.spec import frameworks
from bench.spec.variants import VARIANTS
from bench.worker import cpu_model

# Every framework (its record's distributions), wrapper (a variant's) and engine a run may use (those installed are
# recorded), and the harness's own stack.
LIBRARIES = tuple(dict.fromkeys((
    *(d for f in frameworks.registry().values() for d in f.distributions), *(v.framework for v in VARIANTS.values()),
    "ray", "pyspark", "distributed", "mlflow", "boto3", "s3torchconnector", "numpy", "pandas", "scipy")))


def _gpu_details() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = [line.split(",") for line in out.stdout.strip().splitlines() if "," in line]
    if out.returncode != 0 or not lines:
        return {}
    return {"gpu_model": lines[0][0].strip(), "gpu_count": len(lines), "driver": lines[0][1].strip()}


def git_sha(repo: Path) -> str | None:
    """dtbench's own commit (with -dirty for uncommitted changes) where it runs from its checkout; None for an
    installed dtbench, even one inside another repository (a project's venv): that repository's commit is not
    dtbench's."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=repo, capture_output=True, text=True,
                             timeout=10)
        if top.returncode != 0 or Path(top.stdout.strip()).resolve() != repo.resolve():
            return None
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def environment() -> dict:
    """Versions and hardware, gathered without importing any framework."""
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"dtbench": install.version(), "python": platform.python_version(), "os": platform.platform(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cores_available": len(os.sched_getaffinity(0)),
            "libraries": versions, **_gpu_details()}


def host() -> str:
    return socket.gethostname()
