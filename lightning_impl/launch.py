"""How lightning starts: Lightning's launcher, `fabric run` (lightning_fabric.cli), one per node: it starts the
node's ranks, whose torchrun-style agent joins the run's rendezvous. Standard library only."""
from __future__ import annotations

import sys

from bench.launch_api import REPO_ROOT, LaunchContext, Launcher, NodePlan, Process, RunSpec, rendezvous_environment

# Fabric's precision names (its --precision): autocast for bf16/fp16, fp32 weights stay.
FABRIC_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}


def fabric(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    env = rendezvous_environment(spec, plan, ctx)  # the torchrun inside it joins the run's store
    cmd = [sys.executable, "-m", "lightning_fabric.cli",  # the `fabric run` command
           f"--accelerator={'cuda' if spec.device_type == 'cuda' else 'cpu'}",
           # With knobs set, the code passes DDPStrategy(**knobs) and Fabric refuses a --strategy beside it.
           *([] if spec.task.options.knobs else ["--strategy=ddp"]),
           f"--devices={spec.devices_per_node}", f"--num-nodes={spec.nodes}", f"--node-rank={plan.node_rank}",
           f"--main-address={spec.master_addr}", f"--main-port={ctx.master_port}",
           f"--precision={FABRIC_PRECISION[spec.task.recipe.precision]}",
           str(REPO_ROOT / spec.variant.module.replace(".", "/")) + ".py",
           "--spec", str(ctx.spec_path)]
    return [Process(cmd, env, f"node{plan.node_rank}.log")]


FABRIC = Launcher("fabric", fabric, joins_store=True)
