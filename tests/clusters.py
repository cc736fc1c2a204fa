"""A user's own long-lived services for a test to run against: a Dask cluster started with `dask scheduler` and
`dask worker`, a tracking server started with `mlflow server`, each on 127.0.0.1 at a free port, each stopped
with everything it started when the test ends."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent  # the environment's own `dask` and `mlflow` scripts


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def service(argv: list[str], log: Path, env: dict | None = None):
    """`argv` in a session of its own (its children with it), killed as a group when the block ends."""
    with open(log, "w") as written:
        process = subprocess.Popen(argv, stdout=written, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **(env or {})})
    try:
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def wait_for(ready, what: str, log: Path, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if ready():
                return
        time.sleep(0.5)
    raise AssertionError(f"{what} was not ready within {timeout_s} s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def dask_cluster(folder: Path, workers: int = 2):
    """(address, client): a scheduler and `workers` single-threaded workers, as a user starts them."""
    from distributed import Client

    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    with service([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                 folder / "scheduler.log"), \
         service([str(BIN / "dask"), "worker", address, "--nworkers", str(workers), "--nthreads", "1",
                  "--host", "127.0.0.1", "--no-dashboard", "--local-directory", str(folder / "dask")],
                 folder / "workers.log"):
        wait_for(lambda: socket.create_connection(("127.0.0.1", port), timeout=0.5).close() or True,
                 "the Dask scheduler", folder / "scheduler.log")
        with Client(address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=90)
            yield address, client


@contextlib.contextmanager
def mlflow_server(folder: Path):
    """The URL of an MLflow tracking server on a SQLite store of its own."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = folder / "mlflow.log"
    with service([str(BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
                  "--default-artifact-root", str(folder / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                  "--workers", "1"], log, env={"MLFLOW_DISABLE_TELEMETRY": "true"}):
        wait_for(lambda: urllib.request.urlopen(f"{url}/health", timeout=2).status == 200, "mlflow server", log)
        yield url
