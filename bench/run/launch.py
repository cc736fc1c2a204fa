"""What to start for a run, and the pieces every launcher shares. Each approach's own launcher lives in its
package (`<approach>_impl/launch.py`: argv, environment and config files for one node, as accelerate's
`commands/launch.py` builds its commands); the variants table names it, and this module imports it by name:

    variant.launcher_spec.start(spec, plan, ctx) -> [Process, ...]

Every launch is recorded as the exact command, so it can be re-run by hand.
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.run.interpreters import python_for
from bench.hosts.loopback import free_port, loopback_store_env
from bench.run.processes import RUN_ID_ENV, Process, python_path
from bench.run.runspec import RunSpec
from bench.spec.devices import NodePlan, Placement
from bench.spec.task import knob_texts
from bench.spec.variants import FAST_PATH_SWITCHES, load
from bench.worker import HOST_ADDR_ENV, NODE_RANK_ENV
from bench.worker.kernels import AS_SHIPPED_ENV


@dataclass(frozen=True)
class LaunchContext:
    """What every launcher of one run shares."""
    run_id: str
    run_dir: Path
    spec_path: Path
    master_port: int
    ports: list[int]             # the ports every node's launch must agree on (Launcher.ports: TF's tasks)
    store_port: int | None       # the run's loopback rendezvous store (Launcher.joins_store, all nodes local)
    hosts: dict | None = None    # a multi-host run: every node's Offer (address, its ports) by node rank


@dataclass(frozen=True)
class Launcher:
    """How an approach's processes start: `start` returns one node's processes."""
    name: str                                  # what the row records as its launcher
    start: Callable[[RunSpec, NodePlan, LaunchContext], list[Process]]
    ports: Callable[[RunSpec], int] = lambda spec: 0  # ports to pick once for the whole run (LaunchContext.ports)
    # Its agents or ranks can join a rendezvous store the harness hosts on loopback (torchrun, `fabric run`,
    # DeepSpeed's env:// ranks); not `accelerate launch`, which checks that its port is free first.
    joins_store: bool = False
    # Only the chief (rank 0) trains and reports; every other process serves it (tf-ps).
    chief_reports: bool = False
    # Its ranks always start through bench.engines, torchrun's too (your own function: shipped to the ranks by value).
    through_engine: bool = False


def single_process(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """One process drives the node's devices (DataParallel, MirroredStrategy, the single-device loops)."""
    cmd = [python_for(spec.variant.family), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, node_environment(spec, plan, ctx.run_id, ctx.run_dir), f"node{plan.node_rank}.log")]


PYTHON = Launcher("python", single_process)


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
              store_port: int | None = None, hosts: dict | None = None) -> list[Process]:
    """Every process to start for this host's nodes: the variant's own launcher once per node, or one engine driver.
    A multi-host run's `hosts` (bench.hosts.exchange) carry the ports this host picked."""
    launcher = spec.launcher
    ports = hosts[spec.host_node].ports if hosts else [free_port() for _ in range(launcher.ports(spec))]
    ctx = LaunchContext(run_id, run_dir, spec_path, store_port or spec.master_port or free_port(), ports, store_port,
                        hosts)
    if spec.on_engine or launcher.through_engine:
        return [engine_driver(spec, placement, ctx)]
    return [process for plan in placement.nodes for process in launcher.start(spec, plan, ctx)]


def rendezvous_environment(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> dict[str, str]:
    """The node's environment, and where the harness hosts the run's loopback store (Launcher.joins_store),
    what makes its launcher's agents or ranks join it as clients."""
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if ctx.store_port:
        env.update(loopback_store_env(ctx.store_port))
    return env


def run_temp_dir(run_id: str) -> Path:
    """The run's TMPDIR while it runs: dtbench-<the run id's random tail> in the system's temp folder."""
    return Path(tempfile.gettempdir()) / f"dtbench-{run_id.rsplit('-', 1)[-1]}"


# glibc's malloc gives every allocation above its mmap threshold fresh pages and unmaps them on free, and it
# moves that threshold as a process allocates: PyTorch's CPU tensors come from malloc, so a training step
# faulted in about 1,700 new pages (2.7 ms of kernel time a 16-30 ms step here) or none, depending on the
# process. A fixed threshold above the step's tensors and no trimming keep freed memory in the heap
# (docs/methodology.md#run-to-run-spread-and-the-allocator). The user's own values win.
MALLOC_TUNED = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20), "MALLOC_TRIM_THRESHOLD_": str(4 * 2**30)}
# Under a CPU rank's --device-memory the heap must not keep what the framework freed, or the budget measures
# glibc's retention: FSDP's and ZeRO-3's gathered parameters (a ViT-B block, 28 MB, below MALLOC_TUNED's
# threshold) stayed in the heap and took the rank 1.2 GiB over DDP, where a device allocator under a cap frees
# its cache and retries. Every allocation of 1 MiB or more is mapped, and returned when freed.
MALLOC_BUDGET = {"MALLOC_MMAP_THRESHOLD_": str(2**20)}


def malloc_environment(mode: str, budget: bool = False) -> dict[str, str]:
    """--malloc tuned (the default): MALLOC_TUNED where the environment sets neither (MALLOC_BUDGET under a CPU
    memory budget); glibc: glibc's own."""
    if mode == "glibc" or any(name in os.environ for name in MALLOC_TUNED):
        return {}
    return dict(MALLOC_BUDGET if budget else MALLOC_TUNED)


def fast_path_environment(spec: RunSpec) -> dict[str, str]:
    """The variables that put the run's family on its fast path (its framework record's fast_path_environment),
    where the user's environment sets none of them; --as-shipped: none, and the ranks leave their own switches alone
    too. A switch the run's knobs set (channels_last=true) is set whatever else says, through the variable the audit
    uses."""
    given = knob_texts(spec.task.options.knobs)
    knobs = {s.env: "1" if given[s.name] == "true" else "0" for s in FAST_PATH_SWITCHES
             if s.name in given and s.family is spec.variant.family}
    if spec.as_shipped:
        return {AS_SHIPPED_ENV: "1", **knobs}
    chooser = spec.variant.plugin.fast_path_environment
    chosen = load(chooser)(spec.device_type) if chooser else {}
    return {**{name: value for name, value in chosen.items() if name not in os.environ}, **knobs}


def node_environment(spec: RunSpec, plan: NodePlan, run_id: str, run_dir: Path) -> dict[str, str]:
    """Only what the harness sets: recorded with the command so the launch can be re-run by hand."""
    threads = str(plan.threads)
    return {
        **malloc_environment(spec.malloc, budget=spec.device_type == "cpu" and bool(spec.task.options.device_memory_gib)),
        **fast_path_environment(spec),
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
        **interface_environment(spec),
        **dict(spec.variant.env),  # what the variant itself asks for (tf-multiworker-fit: Keras 2)
    }


def interface_environment(spec: RunSpec) -> dict[str, str]:
    """A multi-host run's collectives on the interface toward the master (bench.hosts.interface), not on
    whatever the host name resolves to; the worker reports this host's address from it."""
    if spec.interface is None:
        return {}
    name = spec.interface.name
    return {"GLOO_SOCKET_IFNAME": name, "NCCL_SOCKET_IFNAME": name, "TP_SOCKET_IFNAME": name,
            HOST_ADDR_ENV: spec.interface.address}
