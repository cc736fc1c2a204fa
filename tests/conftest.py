"""Fixtures. Shared helpers live in helpers.py. TensorFlow and torchvision/timm never meet in this
interpreter (they segfault together), so end-to-end tests drive `python -m bench` in subprocesses."""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from filelock import FileLock


# The test files that take longest (the slowest first, by a CI run's --durations on the 2-vCPU VM), started first:
# `make test` hands each file whole to the next free worker in collection order (--dist loadfile
# --no-loadscope-reorder), so the longest first leaves the short ones to even out the end, instead of one worker
# finishing a long file alone (xdist's own order is by number of tests). The others keep their order after them.
LONGEST_FIRST = ("test_models.py", "test_engines.py", "test_checkpoints.py", "test_multihost.py", "test_e2e_sweep.py",
                 "test_faults.py", "test_input_pipelines.py", "test_soak.py", "test_sharded_variants.py",
                 "test_overhead.py", "test_tracking.py", "test_topologies.py", "test_maxbatch.py", "test_slurm.py",
                 "test_regress.py", "test_html_report.py", "test_utilisation.py", "test_timeseries.py",
                 "test_keras_fit.py", "test_analysis.py", "test_profile.py")


def pytest_collection_modifyitems(items):
    first = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: first.get(item.path.name, len(first)))  # stable: each file's own order kept


@pytest.fixture(scope="session")
def mlflow_schema(tmp_path_factory) -> Path:
    """An empty MLflow SQLite store, made once a worker: MLflow makes a new one by running its migrations (2.6 s
    here), a copy opens in 0.06 s."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    path = tmp_path_factory.mktemp("mlflow-schema") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_store(tmp_path, mlflow_schema):
    """`mlflow_store(name)`: the URI of a fresh, empty SQLite store in the test's folder (a copy of the schema)."""
    def store(name: str = "mlflow.db") -> str:
        shutil.copyfile(mlflow_schema, tmp_path / name)
        return f"sqlite:///{tmp_path / name}"
    return store


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
def s3_server(request, tmp_path_factory):
    """A real S3-compatible server (moto's) on 127.0.0.1, credentials checked, for the whole session. pytest-xdist's
    workers share one: the first to need it starts it and the last to finish with it stops it."""
    from tests.s3server import S3Server

    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):
        shared = shared.parent  # the folder above each worker's own
    state, lock = shared / "s3-server.json", FileLock(shared / "s3-server.lock")
    with lock:
        if state.exists():
            users = json.loads(state.read_text())
            server = S3Server.attach(users)
        else:
            server = S3Server()
            users = {**server.describe(), "users": 0}
        users["users"] += 1
        state.write_text(json.dumps(users))
    server.shared = shared
    yield server
    with lock:
        users = json.loads(state.read_text())
        users["users"] -= 1
        if users["users"]:
            state.write_text(json.dumps(users))
        else:
            server.stop()
            state.unlink()
            for done in shared.glob("s3-*.done"):
                done.unlink()


def _once_a_server(server, name: str, upload) -> None:
    """Upload to the shared server once, whichever worker asks first; the others wait for it."""
    done = server.shared / f"s3-{name}.done"
    with FileLock(server.shared / f"s3-{name}.lock"):
        if not done.exists():
            upload()
            done.touch()


@pytest.fixture(scope="session")
def s3_digits(s3_server):
    """The quick task's whole dataset, exported as an image folder and uploaded with `bench data export-images`
    (1,797 objects, 15 s against moto): what the runs that train from S3 read."""
    from helpers import bench

    url = "s3://dtbench/digits"

    def upload():
        result = bench("data", "export-images", "--task", "quick", url, env=s3_server.env())
        assert result.returncode == 0, result.stderr

    _once_a_server(s3_server, "digits", upload)
    return url


SAMPLE_PER_CLASS = 8


@pytest.fixture(scope="session")
def s3_sample(s3_server):
    """(url, folder): the first images of every class and split of the quick task's dataset, as a local image folder
    and uploaded under s3://dtbench/sample (160 objects, 1 s): what the S3 checks that train nothing read."""
    import shutil
    from unittest import mock

    from helpers import bench

    from bench.worker import s3

    url, folder = "s3://dtbench/sample", s3_server.shared / "s3-sample"

    def upload():
        shutil.rmtree(folder, ignore_errors=True)
        result = bench("data", "export-images", "--task", "quick", str(folder))
        assert result.returncode == 0, result.stderr
        for cls in folder.glob("*/*"):
            for extra in sorted(cls.iterdir())[SAMPLE_PER_CLASS:]:
                extra.unlink()
        with mock.patch.dict(os.environ, s3_server.env()):
            s3.upload(folder, url)

    _once_a_server(s3_server, "sample", upload)
    return url, folder
