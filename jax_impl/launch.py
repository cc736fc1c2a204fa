"""How jax-distributed starts: one process per device slot, each told the coordinator's address (process 0's host
and a port picked for the run), its process id and the process count, which `jax.distributed.initialize` takes.
jax-single and jax-mesh are the harness's plain `python -m` (bench.run.launch.PYTHON). Standard library only."""
from __future__ import annotations

from bench.launch_api import LaunchContext, Launcher, NodePlan, Process, RunSpec, node_environment, python_for

COORDINATOR_ENV = "DTBENCH_JAX_COORDINATOR"


def jax_processes(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    per_node, env, out = spec.processes_per_node, node_environment(spec, plan, ctx.run_id, ctx.run_dir), []
    world = spec.nodes * per_node
    for local in range(per_node):
        index = plan.node_rank * per_node + local
        process_env = {**env, COORDINATOR_ENV: coordinator(ctx), "RANK": str(index), "LOCAL_RANK": str(local),
                       "WORLD_SIZE": str(world)}
        if plan.cuda_visible and per_node > 1:  # one process per GPU: it must see only its own
            process_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible[local]
        cmd = [python_for(spec.variant.family), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
        out.append(Process(cmd, process_env, f"node{plan.node_rank}-process{local}.log"))
    return out


def coordinator(ctx: LaunchContext) -> str:
    """Process 0's host:port: on loopback the run's port, across hosts the first port node 0 offered."""
    if not ctx.hosts:
        return f"127.0.0.1:{ctx.ports[0]}"
    return f"{ctx.hosts[0].address}:{ctx.hosts[0].ports[0]}"


JAX_DISTRIBUTED = Launcher("jax-distributed", jax_processes, ports=lambda spec: 1)
