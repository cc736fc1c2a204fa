"""How accelerate starts: `accelerate launch --config_file`, one per node, from a config file written per run
with every setting explicit (so nothing comes from a user-level default config). Standard library only."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.launch_api import LaunchContext, Launcher, NodePlan, Process, RunSpec, node_environment
from deepspeed_impl.launch import deepspeed_config

# The task's precisions in Accelerate's words (its config file and ACCELERATE_MIXED_PRECISION).
ACCELERATE_MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}
# The model's blocks Accelerate's FSDP plugin wraps one by one (TRANSFORMER_BASED_WRAP by class name): the
# units torch-fsdp shards (torch_impl.fsdp.shard_units): ResNet's bottlenecks, else the layers with weights.
FSDP_BLOCKS = {"resnet50": "Bottleneck", "small-cnn": "Sequential", "mnist-cnn": "Conv2d,Linear"}


def accelerate(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    config_path = ctx.run_dir / f"accelerate_config_node{plan.node_rank}.json"
    deepspeed_path = ctx.run_dir / "deepspeed_config.json"
    config = accelerate_config(spec, plan.node_rank, ctx.master_port, deepspeed_path)
    files = [(str(config_path), json.dumps(config, indent=1))]
    if spec.task.options.accelerate_plugin == "deepspeed":
        files.append((str(deepspeed_path), json.dumps(deepspeed_config(spec), indent=1)))
    env = node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    if spec.device_type == "cpu":
        env["ACCELERATE_USE_CPU"] = "true"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config_path),
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, env, f"node{plan.node_rank}.log", files=tuple(files))]


ACCELERATE = Launcher("accelerate", accelerate)


def accelerate_config(spec: RunSpec, node_rank: int, master_port: int, deepspeed_path: Path | None = None) -> dict:
    """Every setting explicit, so nothing comes from a user-level default config; with --accelerate-plugin the
    seed's `fsdp_config` or `deepspeed_config` section (DeepSpeed's own settings in its config file)."""
    plugin = spec.task.options.accelerate_plugin
    sections: dict = {}
    if plugin == "fsdp":
        blocks = FSDP_BLOCKS.get(spec.task.model.name)
        # The blocks torch-fsdp shards one by one (torch_impl.fsdp.shard_units), by class name; a library's or
        # your own model by Accelerate's size rule (a module of 100k parameters or more is a unit).
        wrap = ({"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap": blocks}
                if blocks else {"fsdp_auto_wrap_policy": "SIZE_BASED_WRAP", "fsdp_min_num_params": 100_000})
        sections["fsdp_config"] = {
            "fsdp_version": 2, **wrap,
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
        **({} if plugin == "deepspeed" else {"mixed_precision": ACCELERATE_MIXED_PRECISION[spec.task.recipe.precision]}),
        "downcast_bf16": "no", "main_training_function": "main", "enable_cpu_affinity": False,
        "tpu_use_cluster": False, "tpu_use_sudo": False,
        "dynamo_config": {"dynamo_backend": "INDUCTOR" if spec.task.options.compile else "NO"},
    }
