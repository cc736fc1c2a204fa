"""What to start for a run: one small function per launcher, each returning its processes (argv +
environment) for one node, as accelerate's `commands/launch.py` builds its commands.

    LAUNCHERS[variant.launcher](spec, plan, ctx) -> [Process, ...]

Every launch is recorded as the exact command, so it can be re-run by hand.
"""
from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench import REPO_ROOT
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
    tf_ports: list[int]          # one per TF task of the run (tf-config, tf-ps)
    store_port: int | None       # the run's loopback rendezvous store (torchrun, all nodes local)


def torchrun(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    cmd = [sys.executable, "-m", "torch.distributed.run",
           f"--nnodes={spec.nodes}", f"--node-rank={plan.node_rank}", f"--nproc-per-node={spec.devices_per_node}",
           f"--master-addr={spec.master_addr}", f"--master-port={ctx.master_port}",
           "--max-restarts=0", "--monitor-interval=0.5",
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, rendezvous_environment(spec, plan, ctx), f"node{plan.node_rank}.log")]


def accelerate(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    config_path = ctx.run_dir / f"accelerate_config_node{plan.node_rank}.json"
    deepspeed_path = ctx.run_dir / "deepspeed_config.json"
    config = accelerate_config(spec, plan.node_rank, ctx.master_port, deepspeed_path)
    files = [(str(config_path), json.dumps(config, indent=1))]
    if spec.task.accelerate_plugin == "deepspeed":
        files.append((str(deepspeed_path), json.dumps(deepspeed_config(spec), indent=1)))
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if spec.device_type == "cpu":
        env["ACCELERATE_USE_CPU"] = "true"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_path),
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, env, f"node{plan.node_rank}.log", files=tuple(files))]


def deepspeed(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """DeepSpeed's per-node launcher (`deepspeed.launcher.launch`, what the `deepspeed` command runs on each
    host): its world_info names every node's devices, its node_rank this one; the ZeRO config is a file."""
    config_path = ctx.run_dir / "deepspeed_config.json"
    world_info = base64.urlsafe_b64encode(json.dumps(deepspeed_world(spec, plan)).encode()).decode()
    env = rendezvous_environment(spec, plan, ctx)  # the ranks' env:// rendezvous: clients of the run's store
    if spec.device_type == "cpu":
        env["DS_ACCELERATOR"] = "cpu"  # never its CUDA accelerator (nor Intel's oneCCL) on a CPU run
    cmd = [sys.executable, "-m", "deepspeed.launcher.launch", f"--world_info={world_info}",
           f"--node_rank={plan.node_rank}", f"--master_addr={spec.master_addr}", f"--master_port={ctx.master_port}",
           "--no_local_rank", "--module", spec.variant.module, "--spec", str(ctx.spec_path),
           "--deepspeed_config", str(config_path)]
    config = json.dumps(deepspeed_config(spec), indent=1)
    # Its CPU backend's shared memory, named deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<rank>.
    segments = (f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_{spec.master_addr}_{ctx.master_port}_*",)
    return [Process(cmd, env, f"node{plan.node_rank}.log", files=((str(config_path), config),),
                    leftovers=segments if spec.device_type == "cpu" else ())]


def fabric(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """Lightning's launcher, `fabric run` (lightning_fabric.cli), one per node: it starts the node's ranks."""
    env = rendezvous_environment(spec, plan, ctx)  # the torchrun inside it joins the run's store
    cmd = [sys.executable, "-m", "lightning_fabric.cli",  # the `fabric run` command
           f"--accelerator={'cuda' if spec.device_type == 'cuda' else 'cpu'}", "--strategy=ddp",
           f"--devices={spec.devices_per_node}", f"--num-nodes={spec.nodes}", f"--node-rank={plan.node_rank}",
           f"--main-address={spec.master_addr}", f"--main-port={ctx.master_port}",
           f"--precision={FABRIC_PRECISION[spec.task.precision]}",
           str(REPO_ROOT / spec.variant.module.replace(".", "/")) + ".py",
           "--spec", str(ctx.spec_path)]
    return [Process(cmd, env, f"node{plan.node_rank}.log")]


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


def tf_ps_tasks(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """ParameterServerStrategy's cluster, every task a process given its TF_CONFIG: the chief (the training
    loop, on node 0), a worker per device slot and a parameter server per node. Workers and parameter servers
    serve until the harness kills them, once the chief is done (`Process.server`)."""
    per_node, env = spec.devices_per_node, node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    cluster = tf_ps_cluster(ctx.tf_ports, spec.nodes, per_node)
    tasks = ([("chief", 0, 0)] if plan.node_rank == 0 else []) + \
        [("worker", plan.node_rank * per_node + local, local) for local in range(per_node)] + [("ps", plan.node_rank, 0)]
    out = []
    for kind, index, local in tasks:
        # The chief reports the run (rank 0); the others join it, numbered after it.
        rank = {"chief": 0, "worker": 1 + index, "ps": 1 + spec.world_size + index}[kind]
        task_env = {**env, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": kind, "index": index}}),
                    "RANK": str(rank), "LOCAL_RANK": str(local), "WORLD_SIZE": str(spec.world_size)}
        if plan.cuda_visible:  # a worker trains on its own GPU; the chief and parameter servers on none
            task_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible[local] if kind == "worker" else ""
        cmd = [python_for(spec.variant), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
        out.append(Process(cmd, task_env, f"node{plan.node_rank}-{kind}{index}.log", server=kind != "chief"))
    return out


def tf_ps_cluster(ports: list[int], nodes: int, per_node: int) -> dict:
    """The one place tf-ps's cluster is built: ports[0] the chief's, then the workers', then one ps a node."""
    workers = nodes * per_node
    return {"chief": [f"127.0.0.1:{ports[0]}"],
            "worker": [f"127.0.0.1:{port}" for port in ports[1:1 + workers]],
            "ps": [f"127.0.0.1:{port}" for port in ports[1 + workers:1 + workers + nodes]]}


LAUNCHERS: dict[str, Callable[[RunSpec, NodePlan, LaunchContext], list[Process]]] = {
    "torchrun": torchrun, "accelerate": accelerate, "python": python, "tf-config": tf_config_workers,
    "deepspeed": deepspeed, "fabric": fabric, "tf-ps": tf_ps_tasks,
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
    tf_tasks = {"tf-config": spec.nodes * spec.processes_per_node,
                "tf-ps": 1 + spec.world_size + spec.nodes}.get(spec.variant.launcher, 0)  # chief, workers, ps
    tf_ports = [free_port() for _ in range(tf_tasks)]
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


def accelerate_config(spec: RunSpec, node_rank: int, master_port: int, deepspeed_path: Path | None = None) -> dict:
    """Every setting explicit, so nothing comes from a user-level default config; with --accelerate-plugin the
    seed's `fsdp_config` or `deepspeed_config` section (DeepSpeed's own settings in its config file)."""
    plugin = spec.task.accelerate_plugin
    sections: dict = {}
    if plugin == "fsdp":
        sections["fsdp_config"] = {
            "fsdp_version": 2, "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            # The blocks torch-fsdp shards one by one (torch_impl.fsdp.shard_units), by class name.
            "fsdp_transformer_layer_cls_to_wrap": FSDP_BLOCKS[spec.task.model],
            "fsdp_reshard_after_forward": True, "fsdp_offload_params": False,
            "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_cpu_ram_efficient_loading": False,
            "fsdp_activation_checkpointing": False}
    elif plugin == "deepspeed":
        # mixed_precision, clipping and the stage live in the file: Accelerate refuses them twice.
        # "standard": every node's ranks started torchrun-style by that node's own launch (no pdsh over ssh).
        sections["deepspeed_config"] = {"deepspeed_config_file": str(deepspeed_path), "zero3_init_flag": False,
                                        "deepspeed_multinode_launcher": "standard"}
    return {
        "compute_environment": "LOCAL_MACHINE",
        # On CPU too: with ACCELERATE_USE_CPU=true this is the launch that really starts N gloo processes
        # (MULTI_CPU in the config, or --cpu, starts one process on this stack).
        "distributed_type": {"fsdp": "FSDP", "deepspeed": "DEEPSPEED"}.get(plugin, "MULTI_GPU"),
        **sections,
        "num_processes": spec.world_size, "num_machines": spec.nodes, "machine_rank": node_rank,
        "main_process_ip": spec.master_addr, "main_process_port": master_port, "rdzv_backend": "static",
        "same_network": True, "gpu_ids": "all", "use_cpu": False, "debug": False,
        **({} if plugin == "deepspeed" else {"mixed_precision": ACCELERATE_MIXED_PRECISION[spec.task.precision]}),
        "downcast_bf16": "no", "main_training_function": "main", "enable_cpu_affinity": False,
        "tpu_use_cluster": False, "tpu_use_sudo": False,
        "dynamo_config": {"dynamo_backend": "INDUCTOR" if spec.task.compile else "NO"},
    }


def deepspeed_world(spec: RunSpec, plan: NodePlan) -> dict[str, list]:
    """DeepSpeed's world_info: every node's device ids (the rank count per node), this node's GPUs as they are
    numbered on the machine: its launcher exports them as the ranks' CUDA_VISIBLE_DEVICES."""
    slots = list(range(spec.devices_per_node))
    return {f"node{n}": list(plan.cuda_visible) if n == plan.node_rank and plan.cuda_visible else slots
            for n in range(spec.nodes)}


# The model's blocks Accelerate's FSDP plugin wraps one by one (TRANSFORMER_BASED_WRAP by class name): the
# units torch-fsdp shards (torch_impl.fsdp.shard_units): ResNet's bottlenecks, else the layers with weights.
FSDP_BLOCKS = {"resnet50": "Bottleneck", "small-cnn": "Sequential", "mnist-cnn": "Conv2d,Linear"}
# Fabric's precision names (its --precision): autocast for bf16/fp16, fp32 weights stay.
FABRIC_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}
# DeepSpeed's precision sections: the model in bf16/fp16, an fp32 master copy in the optimizer.
DEEPSPEED_PRECISION = {"fp32": {}, "bf16": {"bf16": {"enabled": True}},
                       "fp16": {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}}}


# ZeRO's gradient-reduction bucket, in elements: DDP's (torch's default bucket_cap_mb, 25 MiB) of fp32
# gradients. DeepSpeed's default (5e8 elements, 2 GB in fp32) is allocated whole whatever the model (stages 1
# and 2: at every step, twice under overlap_comm; stage 3: once): on a small model it, not ZeRO, set the
# largest batch that fits.
ZERO_REDUCE_BUCKET = 25 * 2**20 // 4


def deepspeed_config(spec: RunSpec) -> dict:
    """Every setting that changes the training explicit (DeepSpeed's defaults would clip gradients at 1.0),
    and the reduction bucket DDP has."""
    task = spec.task
    zero = {"stage": task.zero_stage, "reduce_bucket_size": ZERO_REDUCE_BUCKET}
    if task.zero_stage == 3:
        zero["stage3_param_persistence_threshold"] = 0  # every parameter sharded, however small: ZeRO-3 as such
    return {
        "train_batch_size": task.global_batch,
        "train_micro_batch_size_per_gpu": task.global_batch // spec.world_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.0,
        "prescale_gradients": False,
        "zero_optimization": zero,
        # Our SGD/Adam/AdamW from torch.optim and our schedule stepped by the loop, as in every variant.
        "zero_allow_untested_optimizer": True,
        **DEEPSPEED_PRECISION[task.precision],
        "steps_per_print": 2**31 - 1, "wall_clock_breakdown": False,
    }


def rendezvous_environment(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> dict[str, str]:
    """The node's environment, and where the harness hosts the run's loopback store (bench.run.execute's
    STORE_CLIENTS), what makes its launcher's agents or ranks join it as clients."""
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if ctx.store_port:
        env.update(loopback_store_env(ctx.store_port))
    return env


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
