"""Fixtures. Shared helpers live in helpers.py. TensorFlow and torchvision/timm never meet in this
interpreter (they segfault together), so end-to-end tests drive `python -m bench` in subprocesses."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest


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


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server (moto's) on 127.0.0.1 for the whole session, credentials checked."""
    from tests.s3server import S3Server

    server = S3Server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def s3_digits(s3_server):
    """The quick task's dataset, exported as an image folder and uploaded with `bench data export-images`."""
    from helpers import bench

    url = "s3://dtbench/digits"
    result = bench("data", "export-images", "--task", "quick", url, env=s3_server.env())
    assert result.returncode == 0, result.stderr
    return url
