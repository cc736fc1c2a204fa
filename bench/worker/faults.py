"""Test-only fault injection, named by DTBENCH_FAULT: "crash", "hang" or "kill" (SIGKILL itself) at a step,
e.g. "crash:rank=1:step=3" (rank 0 and step 1 if unnamed); "slow": from that step on each of the rank's
batches comes `ms` (default 20) late, as from a slower disk: the straggler the report should name,
e.g. "slow:rank=1:ms=20"."""
from __future__ import annotations

import os
import signal
import time

from bench.worker.clock import StepClock

FAULT_ENV = "DTBENCH_FAULT"


def inject(rank: int, step: int, clock: StepClock) -> None:
    """Called after every step of every rank: the fault named for this rank and step, if any."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    kind, *args = spec.split(":")
    params = dict(arg.split("=", 1) for arg in args)
    if int(params.get("rank", 0)) != rank or int(params.get("step", 1)) != step:
        return
    if kind == "crash":
        raise RuntimeError(f"injected crash at step {step}")
    if kind == "hang":
        time.sleep(24 * 3600)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "slow":
        clock.input_delay_s = float(params.get("ms", 20)) / 1000
