"""What to start for a run: one small function per launcher, each returning its processes (argv +
environment) for one node, as accelerate's `commands/launch.py` builds its commands.

    LAUNCHERS[variant.launcher](spec, plan, ctx) -> [Process, ...]

Every launch is recorded as the exact command, so it can be re-run by hand.
"""
from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.run.interpreters import python_for
from bench.run.loopback import free_port, loopback_store_env
from bench.run.processes import RUN_ID_ENV, Process, python_path
from bench.run.runspec import RunSpec
from bench.spec.devices import NodePlan, Placement
from bench.spec.task import ACCELERATE_MIXED_PRECISION, SpecError
from bench.worker import NODE_RANK_ENV


@dataclass(frozen=True)
class LaunchContext:
    """What every launcher of one run shares."""
    run_id: str
    run_dir: Path
    spec_path: Path
    master_port: int
    tf_ports: list[int]          # one per TF worker of the run (tf-config only)
    store_port: int | None       # the run's loopback rendezvous store (torchrun, all nodes local)


def torchrun(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    cmd = [sys.executable, "-m", "torch.distributed.run",
           f"--nnodes={spec.nodes}", f"--node-rank={plan.node_rank}", f"--nproc-per-node={spec.devices_per_node}",
           f"--master-addr={spec.master_addr}", f"--master-port={ctx.master_port}",
           "--max-restarts=0", "--monitor-interval=0.5",
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if ctx.store_port:
        env.update(loopback_store_env(ctx.store_port))
    return [Process(cmd, env, f"node{plan.node_rank}.log")]


def accelerate(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    config_path = ctx.run_dir / f"accelerate_config_node{plan.node_rank}.json"
    config = json.dumps(accelerate_config(spec, plan.node_rank, ctx.master_port), indent=1)
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if spec.device_type == "cpu":
        env["ACCELERATE_USE_CPU"] = "true"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_path),
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, env, f"node{plan.node_rank}.log", files=((str(config_path), config),))]


def python(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """One process drives the node's devices (DataParallel, MirroredStrategy, the single-device loops)."""
    cmd = [python_for(spec.variant), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, node_environment(spec, plan, ctx.run_id, ctx.run_dir), f"node{plan.node_rank}.log")]


def tf_config_workers(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """No launcher of TensorFlow's own: every worker is a process given its TF_CONFIG."""
    per_node, env, out = spec.processes_per_node, node_environment(spec, plan, ctx.run_id, ctx.run_dir), []
    for local in range(per_node):
        index = plan.node_rank * per_node + local
        worker_env = {**env, "TF_CONFIG": json.dumps(tf_config(ctx.tf_ports, index)), "RANK": str(index),
                      "LOCAL_RANK": str(local), "WORLD_SIZE": str(len(ctx.tf_ports))}
        if plan.cuda_visible and per_node > 1:  # one worker per GPU: it must see only its own
            worker_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible[local]
        cmd = [python_for(spec.variant), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
        out.append(Process(cmd, worker_env, f"node{plan.node_rank}-worker{local}.log"))
    return out


LAUNCHERS: dict[str, Callable[[RunSpec, NodePlan, LaunchContext], list[Process]]] = {
    "torchrun": torchrun, "accelerate": accelerate, "python": python, "tf-config": tf_config_workers,
}


def engine_driver(spec: RunSpec, placement: Placement, ctx: LaunchContext) -> Process:
    """The engine starts every rank itself; the ranks pin themselves from the spec."""
    env = node_environment(spec, placement.nodes[0], ctx.run_id, ctx.run_dir)
    env.pop("OMP_NUM_THREADS"), env.pop("MKL_NUM_THREADS")  # sized per rank from its slot
    if spec.device_type == "cuda":  # every node's GPUs: each rank narrows to its own node's (engines.api)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(g for node in placement.nodes for g in node.cuda_visible)
    cmd = [sys.executable, "-m", "bench.engines.driver", "--spec", str(ctx.spec_path), "--engine", spec.engine]
    if spec.engine_address:
        cmd += ["--address", spec.engine_address]
    return Process(cmd, env, "driver.log")


def processes(spec: RunSpec, placement: Placement, run_id: str, run_dir: Path, spec_path: Path,
              store_port: int | None = None) -> list[Process]:
    """Every process to start for this host's nodes: the variant's own launcher once per node, or one engine driver."""
    tf_ports = ([free_port() for _ in range(spec.nodes * spec.processes_per_node)]
                if spec.variant.launcher == "tf-config" else [])
    ctx = LaunchContext(run_id, run_dir, spec_path, store_port or spec.master_port or free_port(), tf_ports,
                        store_port)
    if spec.on_engine:
        return [engine_driver(spec, placement, ctx)]
    if spec.variant.launcher not in LAUNCHERS:
        raise SpecError(f"variant {spec.variant.name} names an unknown launcher {spec.variant.launcher!r}")
    launcher = LAUNCHERS[spec.variant.launcher]
    return [process for plan in placement.nodes for process in launcher(spec, plan, ctx)]


def tf_config(ports: list[int], index: int) -> dict:
    """The one place TF_CONFIG is built: a worker cluster on loopback, this process's task index."""
    return {"cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
            "task": {"type": "worker", "index": index}}


def accelerate_config(spec: RunSpec, node_rank: int, master_port: int) -> dict:
    """Every setting explicit, so nothing comes from a user-level default config."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        # On CPU too: with ACCELERATE_USE_CPU=true this is the launch that really starts N gloo processes
        # (MULTI_CPU in the config, or --cpu, starts one process on this stack).
        "distributed_type": "MULTI_GPU",
        "num_processes": spec.world_size, "num_machines": spec.nodes, "machine_rank": node_rank,
        "main_process_ip": spec.master_addr, "main_process_port": master_port, "rdzv_backend": "static",
        "same_network": True, "gpu_ids": "all", "use_cpu": False, "debug": False,
        "mixed_precision": ACCELERATE_MIXED_PRECISION[spec.task.precision],
        "downcast_bf16": "no", "main_training_function": "main", "enable_cpu_affinity": False,
        "tpu_use_cluster": False, "tpu_use_sudo": False,
        "dynamo_config": {"dynamo_backend": "INDUCTOR" if spec.task.compile else "NO"},
    }


def run_temp_dir(run_id: str) -> Path:
    """The run's TMPDIR while it runs: dtbench-<the run id's random tail> in the system's temp folder."""
    return Path(tempfile.gettempdir()) / f"dtbench-{run_id.rsplit('-', 1)[-1]}"


def node_environment(spec: RunSpec, plan: NodePlan, run_id: str, run_dir: Path) -> dict[str, str]:
    """Only what the harness sets: recorded with the command so the launch can be re-run by hand."""
    threads = str(plan.threads)
    return {
        RUN_ID_ENV: run_id, NODE_RANK_ENV: str(plan.node_rank), "PYTHONPATH": python_path(),
        "PYTHONUNBUFFERED": "1",
        # A short temp folder of the run's own (moved into the run directory afterwards: torchrun leaves a
        # torchelastic_* folder there). Short, because multiprocessing puts Unix sockets in it (DataLoader
        # workers pass batches through one): under a long run directory their paths pass AF_UNIX's 108
        # bytes and a worker's batch is lost, the run hanging.
        "TMPDIR": str(run_temp_dir(run_id)),
        # Size every thread pool to the slot: an oversized OpenMP pool collapses under contention.
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        # Never let a CPU run touch a GPU, and let a GPU node see only its own GPUs.
        "CUDA_VISIBLE_DEVICES": ",".join(plan.cuda_visible) if plan.cuda_visible is not None else "",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
