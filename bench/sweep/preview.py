"""`bench sweep --dry-run`: the whole plan, built by the code that launches it, and nothing started.

For each run, in the order the sweep runs them: every process the harness would start (command, the
environment that matters, a launcher's config file), and every rank's view — its rank, local rank and
world size, the GPUs it trains on (chosen by the rule the ranks use, `bench.worker.gpus.cuda_index`), its
cores, its rendezvous or TF_CONFIG. `--assume-gpus N` plans for a box of N GPUs from one without any.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from bench.results import ResultStore
from bench.sweep.forecast import Forecast, earlier_rows, gpu_projection
from bench.run.launch import processes
from bench.run.processes import Process
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine, Placement
from bench.spec.task import DEFAULT_TASK
from bench.worker.gpus import cuda_index

# The environment a reader of the plan needs; the rest (PYTHONPATH, TMPDIR, ...) is the same for every run.
SHOWN_ENV = ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "RANK", "LOCAL_RANK", "WORLD_SIZE", "TF_CONFIG",
             "ACCELERATE_USE_CPU", "TF_USE_LEGACY_KERAS", "TF_ENABLE_ONEDNN_OPTS", "DTBENCH_AS_SHIPPED")


@dataclass(frozen=True)
class RankPlan:
    """One training process as it will see the world (a single-process variant: one per node)."""
    node: int
    rank: int
    local_rank: int
    world_size: int
    gpus: tuple[str, ...]         # the GPUs it trains on, as the box names them; () on CPU
    cores: tuple[int, ...]
    rendezvous: str               # MASTER_ADDR:PORT, the TF_CONFIG task, or the engine's
    tf_config: dict | None = None


@dataclass(frozen=True)
class RunPlan:
    index: int
    spec: RunSpec
    skipped: str | None = None    # not applicable: the sweep records a `skipped` row
    processes: list[Process] = field(default_factory=list)
    ranks: list[RankPlan] = field(default_factory=list)


def assumed_machine(gpus: int, cores: tuple[int, ...]) -> Machine:
    return Machine(cores=cores, gpus=tuple(str(i) for i in range(gpus)), gpu_names=("assumed GPU",) * gpus)


def build(specs: list[RunSpec], machine: Machine, out_dir: Path) -> list[RunPlan]:
    """Every run's processes and ranks, from the launchers themselves (ports are picked again at launch)."""
    plans = []
    for index, spec in enumerate(specs, 1):
        reason = spec.inapplicable()
        if reason:
            plans.append(RunPlan(index, spec, skipped=reason))
            continue
        placement = spec.check(machine)
        run_dir = out_dir / "runs" / f"<run {index}>"
        procs = processes(spec, placement, f"<run {index}>", run_dir, run_dir / "spec.json")
        plans.append(RunPlan(index, spec, None, procs, ranks(spec, placement, procs)))
    return plans


def ranks(spec: RunSpec, placement: Placement, procs: list[Process]) -> list[RankPlan]:
    """What each training process will see, by how the variant's launcher (or the engine) starts it."""
    cuda = spec.device_type == "cuda"
    out = []
    if spec.on_engine:
        per_node = spec.devices_per_node
        for rank in range(spec.world_size):
            node, local = divmod(rank, per_node)
            plan = placement.nodes[node]
            # Ray gives each worker a GPU of its choosing; Dask and Spark ranks narrow to their node's.
            gpus = () if not cuda or spec.engine == "ray" else (plan.cuda_visible[cuda_index(list(plan.cuda_visible), local)],)
            out.append(RankPlan(node, rank, local, spec.world_size, gpus, plan.cpu_slots[local % len(plan.cpu_slots)],
                                f"{spec.engine} (file:// store on this host)" if spec.all_local else spec.engine))
        return out
    if all("TF_CONFIG" in proc.env for proc in procs):  # a process per TF task (no launcher of TF's own)
        for proc in procs:
            config = json.loads(proc.env["TF_CONFIG"])
            if config["task"]["type"] != "worker":  # tf-ps's chief and parameter servers: shown as processes
                continue
            index = config["task"]["index"]
            node, local = divmod(index, spec.processes_per_node)
            plan = placement.nodes[node]
            visible = tuple(g for g in proc.env["CUDA_VISIBLE_DEVICES"].split(",") if g) if cuda else ()
            out.append(RankPlan(node, index, local, len(config["cluster"]["worker"]), visible, plan.cpu_slots[local],
                                config["cluster"]["worker"][index], config))
        return out
    if all(k in proc.env for proc in procs for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE")):
        # A process per rank the harness starts itself, told its rank (jax-distributed's): no launcher between.
        for proc in procs:
            index, local = int(proc.env["RANK"]), int(proc.env["LOCAL_RANK"])
            plan = placement.nodes[index // spec.processes_per_node]
            visible = tuple(g for g in proc.env.get("CUDA_VISIBLE_DEVICES", "").split(",") if g) if cuda else ()
            out.append(RankPlan(plan.node_rank, index, local, int(proc.env["WORLD_SIZE"]), visible,
                                plan.cpu_slots[local], "its own coordinator (one process per rank)"))
        return out
    for proc, plan in zip(procs, placement.nodes):
        visible = list(plan.cuda_visible or ())
        if spec.variant.single_process:  # one process drives all of its node's devices
            out.append(RankPlan(plan.node_rank, plan.node_rank, 0, spec.nodes, tuple(visible), plan.cpu_slots[0],
                                "none (one process)"))
            continue
        per_node = spec.processes_per_node
        for local in range(per_node):
            gpus = (visible[cuda_index(visible, local)],) if cuda else ()
            out.append(RankPlan(plan.node_rank, plan.node_rank * per_node + local, local, spec.world_size, gpus,
                                plan.cpu_slots[local], rendezvous(proc)))
    return out


def rendezvous(proc: Process) -> str:
    """MASTER_ADDR:MASTER_PORT as the launcher's flags (torchrun's, DeepSpeed's, `fabric run`'s) or
    Accelerate's config file give it."""
    command = " ".join(proc.command)
    address = re.search(r"--(?:master[-_]addr|main-address)=(\S+)", command)
    port = re.search(r"--(?:master[-_]port|main-port)=(\S+)", command)
    if address and port:
        return f"{address[1]}:{port[1]}"
    config = json.loads(proc.files[0][1])
    return f"{config['main_process_ip']}:{config['main_process_port']}"


def estimate(specs: list[RunSpec], out_dir: Path) -> tuple[float, int, int]:
    """(seconds, runs priced by their own configuration, runs with no earlier row of their kind), priced as the
    sweep's clock prices a run before any has finished (bench.sweep.forecast)."""
    forecast = Forecast(earlier_rows(specs, ResultStore(out_dir)))
    priced = [forecast.estimate(spec) for spec in specs]
    return (sum(s for s, _ in priced if s is not None), sum(own for _, own in priced),
            sum(s is None for s, _ in priced))


def task_line(task, machine: Machine) -> str:
    """What every run of `task` trains: the model, its images, precision and batch (and why that batch)."""
    recipe = task.recipe
    batch = recipe.per_device_batch or recipe.global_batch
    steps = f", at most {recipe.steps_per_epoch} steps each" if recipe.steps_per_epoch else ""
    sized = ""
    if task.name == DEFAULT_TASK["cuda"]:
        memory = f"{min(machine.gpu_memory_mib) / 1024:.0f} GiB" if machine.gpu_memory_mib else "80 GB (assumed)"
        sized = f", sized to the GPUs' memory: {memory}"
    data = "synthetic images" if task.synthetic else f"{task.data.dataset} ({task.data.input})"
    return (f"Task {task.name}: {task.model.name} at {task.model.image_size} px, {recipe.precision}, {batch} images a "
            f"device{sized}; {recipe.epochs} epochs{steps} of {data}")


def render(plans: list[RunPlan], machine: Machine, assumed: bool, out_dir: Path, analysis: bool) -> str:
    gpus = f"{len(machine.gpus)} GPUs" + (" (assumed: --assume-gpus)" if assumed else "") if machine.gpus else "no GPU"
    lines = [f"Plan: {len(plans)} runs on this machine's {len(machine.cores)} cores and {gpus}. Nothing is started;",
             "ports are picked free again at launch, so those shown are examples."]
    specs = [p.spec for p in plans if not p.skipped]
    seconds, own, unknown = estimate(specs, out_dir)
    if seconds:
        lines.append(f"Estimate: {seconds / 60:.0f} min for {len(specs) - unknown} runs, from earlier rows of the same "
                     f"task (the committed reference, {out_dir}): {own} by their own configuration"
                     + (", the rest by the closest kind of run" if own < len(specs) - unknown else "")
                     + (f"; {unknown} runs have none" if unknown else ""))
    elif projected := gpu_projection(specs):
        lines.append(projected)
    else:
        lines.append(f"Estimate: none (neither the committed reference nor {out_dir} holds a finished row of this task)")
    lines += list(dict.fromkeys(task_line(s.task, machine) for s in specs))
    if analysis:
        lines.append("Before the runs: the peak matmul benchmark per precision and, once per machine, the fast-path "
                     "audit (each framework's switches on and off); after them: the collective microbenchmarks at "
                     "each multi-device count.")
    for plan in plans:
        spec = plan.spec
        phases = "" if not spec.task.timing.input_phases else (
            " + its input's cost and exposed communication in the run (input phases)" if spec.world_size > 1
            else " + its input's cost in the run (input phases)")
        lines += ["", f"[{plan.index}/{len(plans)}] {spec.key.label}{phases}"]
        if plan.skipped:
            lines.append(f"  skipped (recorded as such): {plan.skipped}")
            continue
        for proc in plan.processes:
            shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in proc.env.items() if k in SHOWN_ENV)
            lines.append(f"  {proc.log_name.removesuffix('.log')}: {shown} {shlex.join(proc.command)}")
            for path, content in proc.files:
                lines.append(f"    {Path(path).name}: {json.dumps(json.loads(content), separators=(',', ':'))}")
        for r in plan.ranks:
            where = f"GPU {','.join(r.gpus)}" if r.gpus else ("GPU chosen by Ray" if spec.device_type == "cuda" else "CPU")
            lines.append(f"    node {r.node} rank {r.rank}/{r.world_size} local {r.local_rank}: {where}, "
                         f"cores {','.join(map(str, r.cores))}, rendezvous {r.rendezvous}")
    return "\n".join(lines)
