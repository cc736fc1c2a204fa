"""tf-ps (ParameterServerStrategy) on CPU dies as a whole when a worker dies. How it trains, asynchronous and
ended with its chief, is read from the end-to-end sweep's run (test_e2e_sweep.py)."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bench.run.processes import processes_of_run
from helpers import CPU, REPO, rows


def tf_task(pid: int) -> dict | None:
    """The TF_CONFIG task of a live process (None: not a TF task)."""
    environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
    config = next((entry.split(b"=", 1)[1] for entry in environ if entry.startswith(b"TF_CONFIG=")), None)
    return json.loads(config)["task"] if config else None


@pytest.mark.slow
def test_a_killed_worker_fails_the_tf_ps_run_and_leaves_no_process(tmp_path):
    harness = subprocess.Popen([sys.executable, "-m", "bench", "run", "--variant", "tf-ps", "--devices", "2",
                                "--task", "default", "--out", str(tmp_path), "--timeout", "300"], cwd=REPO,
                               env={**os.environ, **CPU}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline, victim = time.time() + 120, None
    while victim is None and time.time() < deadline:  # worker 1, once the chief has trained a step
        for chief_report in tmp_path.glob("runs/*/rank0.jsonl"):
            if '"first_step"' in chief_report.read_text():
                run_id = chief_report.parent.name
                victim = next((pid for pid in processes_of_run(chief_report.parent.name)
                               if tf_task(pid) == {"type": "worker", "index": 1}), None)
        time.sleep(0.5)
    assert victim, "worker 1 never started training"
    os.kill(victim, signal.SIGKILL)
    harness.communicate(timeout=120)
    assert harness.returncode == 1
    [row] = rows(tmp_path)
    assert row["status"] == "failed" and "node0-worker1 killed by signal 9" in row["error"]
    assert processes_of_run(row["run_id"]) == []
