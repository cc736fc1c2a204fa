"""How the PyTorch approaches start: torchrun, one per node (torch-ddp, torch-fsdp); the single-process ones
(torch-single, torch-dp) are the harness's plain `python -m` (bench.run.launch.PYTHON). Standard library only."""
from __future__ import annotations

import sys

from bench.launch_api import LaunchContext, Launcher, NodePlan, Process, RunSpec, rendezvous_environment


def torchrun(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    cmd = [sys.executable, "-m", "torch.distributed.run",
           f"--nnodes={spec.nodes}", f"--node-rank={plan.node_rank}", f"--nproc-per-node={spec.devices_per_node}",
           f"--master-addr={spec.master_addr}", f"--master-port={ctx.master_port}",
           "--max-restarts=0", "--monitor-interval=0.5",
           "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
    return [Process(cmd, rendezvous_environment(spec, plan, ctx), f"node{plan.node_rank}.log")]


TORCHRUN = Launcher("torchrun", torchrun, joins_store=True)


def _through_engine(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    raise AssertionError("your own function's ranks start through bench.engines (Launcher.through_engine)")


# Your own function (`@dtbench.distributed`): shipped to the ranks by value, so torchrun's ranks too are started by
# bench.engines' torchrun adapter (its elastic_launch), the other engines' as for every variant.
FUNCTION = Launcher("torchrun", _through_engine, through_engine=True)
