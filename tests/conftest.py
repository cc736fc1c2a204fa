"""Shared helpers. Framework tests that need a framework in-process import it themselves;
TensorFlow and torchvision/timm never meet in this interpreter (they segfault together),
so end-to-end tests drive `python -m bench` in subprocesses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def bench(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `python -m bench ARGS` as a user would, from the repo root."""
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)


def rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "results"


@pytest.fixture(autouse=True)
def never_tensorflow_beside_torchvision():
    """Importing tensorflow and then torchvision/timm in one process segfaults on this stack:
    fail the test that brought them together, instead of crashing the whole run later."""
    yield
    if "tensorflow" in sys.modules:
        together = [m for m in ("torchvision", "timm") if m in sys.modules]
        assert not together, f"tensorflow and {together} were imported into the pytest process"
