"""How deepspeed starts: DeepSpeed's per-node launcher (`deepspeed.launcher.launch`, what the `deepspeed`
command runs on each host), and the config file it reads, written per run. Standard library only."""
from __future__ import annotations

import base64
import json
import os
import sys

from bench.launch_api import LaunchContext, Launcher, NodePlan, Process, RunSpec, chosen_knobs, rendezvous_environment
from deepspeed_impl.knobs import ZERO, ZERO_REDUCE_BUCKET

# DeepSpeed's precision sections: the model in bf16/fp16, an fp32 master copy in the optimizer.
DEEPSPEED_PRECISION = {"fp32": {}, "bf16": {"bf16": {"enabled": True}},
                       "fp16": {"fp16": {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}}}


def deepspeed(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """Its world_info names every node's devices, its node_rank this one; the ZeRO config is a file."""
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


DEEPSPEED = Launcher("deepspeed", deepspeed, joins_store=True)


def deepspeed_world(spec: RunSpec, plan: NodePlan) -> dict[str, list]:
    """DeepSpeed's world_info: every node's device ids (the rank count per node), this node's GPUs as they are
    numbered on the machine: its launcher exports them as the ranks' CUDA_VISIBLE_DEVICES."""
    slots = list(range(spec.devices_per_node))
    return {f"node{n}": list(plan.cuda_visible) if n == plan.node_rank and plan.cuda_visible else slots
            for n in range(spec.nodes)}


def deepspeed_config(spec: RunSpec) -> dict:
    """Every setting that changes the training explicit (DeepSpeed's defaults would clip gradients at 1.0),
    the reduction bucket DDP has, and the ZeRO knobs the run set (`bench run --set`, deepspeed_impl/knobs.py).
    Accelerate's DeepSpeed plugin reads the same file."""
    task = spec.task
    zero = {"stage": task.options.zero_stage, "reduce_bucket_size": ZERO_REDUCE_BUCKET}
    if task.options.zero_stage == 3:
        zero["stage3_param_persistence_threshold"] = 0  # every parameter sharded, however small: ZeRO-3 as such
    zero.update(chosen_knobs(ZERO, task.options.knobs))

    return {
        "train_batch_size": task.recipe.global_batch,
        "train_micro_batch_size_per_gpu": task.recipe.global_batch // spec.world_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 0.0,
        "prescale_gradients": False,
        "zero_optimization": zero,
        # Our SGD/Adam/AdamW from torch.optim and our schedule stepped by the loop, as in every variant.
        "zero_allow_untested_optimizer": True,
        **DEEPSPEED_PRECISION[task.recipe.precision],
        "steps_per_print": 2**31 - 1, "wall_clock_breakdown": False,
    }
