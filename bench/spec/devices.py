"""Device discovery and pinning plans, without importing any framework.

A device slot is what one replica trains on: one GPU, or on a CPU-only
machine a fixed set of cores (1 by default, like one GPU). Adding devices then
adds compute, so scaling curves mean on CPU what they mean on GPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

from bench.spec.task import SpecError


@dataclass(frozen=True)
class Machine:
    cores: tuple[int, ...]          # CPU cores this process may use
    gpus: tuple[str, ...] = ()      # CUDA device ids as CUDA_VISIBLE_DEVICES names them
    gpu_names: tuple[str, ...] = ()
    gpu_memory_mib: tuple[int, ...] = ()  # each GPU's memory as nvidia-smi reports it (empty where unknown)

    @property
    def default_device_type(self) -> str:
        return "cuda" if self.gpus else "cpu"


@dataclass(frozen=True)
class NodePlan:
    node_rank: int
    cuda_visible: tuple[str, ...] | None  # None on CPU
    cpu_slots: tuple[tuple[int, ...], ...]  # per local rank: the cores it is pinned to

    @property
    def threads(self) -> int:
        return len(self.cpu_slots[0])


@dataclass(frozen=True)
class Placement:
    nodes: tuple[NodePlan, ...]
    oversubscribed: bool
    warnings: tuple[str, ...] = field(default=())


def _nvidia_smi() -> list[tuple[str, str, int | None]]:
    """(index, name, memory in MiB) of every GPU nvidia-smi lists."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    found = []
    for line in out.stdout.strip().splitlines():
        # index, name, memory; memory reads "[N/A]" on some vGPUs: the GPU still counts, its size unknown
        index, *rest = [part.strip() for part in line.split(",")]
        size = rest.pop() if len(rest) >= 2 else ""
        if index.isdigit():  # not a notice nvidia-smi printed beside the table
            found.append((index, ", ".join(rest) or "unknown GPU", int(size) if size.isdigit() else None))
    return found


def discover() -> Machine:
    cores = tuple(sorted(os.sched_getaffinity(0)))
    found = _nvidia_smi()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:  # the user already narrowed the GPUs: respect it
        wanted = [v.strip() for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        known = {g[0]: g for g in found}
        found = [known.get(g, (g, "unknown GPU", None)) for g in wanted] if found else []
    memory = tuple(m for _, _, m in found)
    return Machine(cores=cores, gpus=tuple(g for g, _, _ in found), gpu_names=tuple(n for _, n, _ in found),
                   gpu_memory_mib=memory if all(memory) else ())


def check_topology(devices: int, nodes: int, devices_option: str = "--devices") -> None:
    """`devices` split evenly over `nodes`, or the one-line error (`make bench` passes GPUS and NODES as these)."""
    if devices < 1 or nodes < 1:
        raise SpecError(f"{devices_option} and --nodes must be at least 1 (got {devices} and {nodes})")
    if devices % nodes:
        make = " (make: GPUS and NODES)" if devices_option == "--max-devices" else ""
        raise SpecError(f"{devices_option} {devices} does not divide by --nodes {nodes}: pick a multiple of {nodes}{make}")


def place(device_type: str, nodes: int, devices_per_node: int, machine: Machine,
          cores_per_slot: int = 1, processes_per_node: int | None = None) -> Placement:
    """Which GPUs each node sees and which cores each process is pinned to."""
    world = nodes * devices_per_node
    # Single-process variants drive all of a node's devices from one process.
    procs = processes_per_node or devices_per_node
    if device_type == "cuda":
        if world > len(machine.gpus):
            raise SpecError(f"asked for {world} GPUs but {len(machine.gpus)} are visible: lower GPUS/--devices")
        # Share the cores among every process on the box so the input pipelines don't fight.
        per_proc = max(1, len(machine.cores) // (nodes * procs))
        slots = _core_slots(machine.cores, nodes * procs, per_proc)
        plans = tuple(NodePlan(n, machine.gpus[n * devices_per_node:(n + 1) * devices_per_node],
                               tuple(slots[n * procs:(n + 1) * procs])) for n in range(nodes))
        return Placement(plans, oversubscribed=False)
    if device_type != "cpu":
        raise SpecError(f"unknown device type {device_type!r}: choose cpu or cuda")
    if cores_per_slot < 1:
        raise SpecError("cores per slot must be at least 1")
    needed = world * cores_per_slot
    slots = _core_slots(machine.cores, world, cores_per_slot)
    # A single-process variant pins its one process to all its slots' cores.
    per_node = [slots[n * devices_per_node:(n + 1) * devices_per_node] for n in range(nodes)]
    if procs == 1:
        per_node = [[tuple(sorted({c for slot in node for c in slot}))] for node in per_node]
    plans = tuple(NodePlan(n, None, tuple(per_node[n])) for n in range(nodes))
    oversubscribed = needed > len(machine.cores)
    warnings = (f"{world} slots x {cores_per_slot} cores need {needed} cores, {len(machine.cores)} "
                "available: slots share cores (recorded as oversubscribed)",) if oversubscribed else ()
    return Placement(plans, oversubscribed, warnings)


def _core_slots(cores: tuple[int, ...], count: int, per_slot: int) -> list[tuple[int, ...]]:
    """`count` slots of `per_slot` cores, contiguous, wrapping round when cores run out."""
    return [tuple(cores[(i * per_slot + j) % len(cores)] for j in range(per_slot)) for i in range(count)]
