"""How the TensorFlow approaches start. TensorFlow has no launcher of its own: every worker (tf-multiworker)
or task (tf-ps) is a process given its TF_CONFIG; tf-single and tf-mirrored are the harness's plain
`python -m` (bench.run.launch.PYTHON). TF_CONFIG is built here and nowhere else. Standard library only."""
from __future__ import annotations

import json

from bench.launch_api import LaunchContext, Launcher, NodePlan, Process, RunSpec, node_environment, python_for


def tf_config_workers(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    per_node, env, out = spec.processes_per_node, node_environment(spec, plan, ctx.run_id, ctx.run_dir), []
    workers = worker_addresses(spec, ctx)
    for local in range(per_node):
        index = plan.node_rank * per_node + local
        worker_env = {**env, "TF_CONFIG": json.dumps(tf_config(workers, index)), "RANK": str(index),
                      "LOCAL_RANK": str(local), "WORLD_SIZE": str(len(workers))}
        if plan.cuda_visible and per_node > 1:  # one worker per GPU: it must see only its own
            worker_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible[local]
        cmd = [python_for(spec.variant.family), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
        out.append(Process(cmd, worker_env, f"node{plan.node_rank}-worker{local}.log"))
    return out


TF_CONFIG_WORKERS = Launcher("tf-config", tf_config_workers, ports=lambda spec: spec.nodes * spec.processes_per_node)


def worker_addresses(spec: RunSpec, ctx: LaunchContext) -> list[str]:
    """Every worker's host:port in task-index order: on loopback from the run's ports, or across hosts from
    what each host offered at the meeting (its address, the ports it picked)."""
    per_node = spec.processes_per_node
    if not ctx.hosts:
        return [f"127.0.0.1:{port}" for port in ctx.ports]
    return [f"{ctx.hosts[node].address}:{ctx.hosts[node].ports[local]}" for node in range(spec.nodes)
            for local in range(per_node)]


def tf_ps_tasks(spec: RunSpec, plan: NodePlan, ctx: LaunchContext) -> list[Process]:
    """ParameterServerStrategy's cluster, every task a process given its TF_CONFIG: the chief (the training
    loop, on node 0), a worker per device slot and a parameter server per node. Workers and parameter servers
    serve until the harness kills them, once the chief is done (`Process.server`)."""
    per_node, env = spec.devices_per_node, node_environment(spec, plan, ctx.run_id, ctx.run_dir)
    cluster = tf_ps_cluster(ctx.ports, spec.nodes, per_node) if not ctx.hosts else tf_ps_cluster_across(ctx.hosts, per_node)
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
        cmd = [python_for(spec.variant.family), "-m", spec.variant.module, "--spec", str(ctx.spec_path)]
        out.append(Process(cmd, task_env, f"node{plan.node_rank}-{kind}{index}.log", server=kind != "chief"))
    return out


# A chief, a worker per slot, a parameter server per node.
TF_PS_TASKS = Launcher("tf-ps", tf_ps_tasks, ports=lambda spec: 1 + spec.world_size + spec.nodes,
                       chief_reports=True)


def tf_ps_cluster(ports: list[int], nodes: int, per_node: int) -> dict:
    """The one place tf-ps's cluster is built: ports[0] the chief's, then the workers', then one ps a node."""
    workers = nodes * per_node
    return {"chief": [f"127.0.0.1:{ports[0]}"],
            "worker": [f"127.0.0.1:{port}" for port in ports[1:1 + workers]],
            "ps": [f"127.0.0.1:{port}" for port in ports[1 + workers:1 + workers + nodes]]}


def tf_ps_cluster_across(hosts: dict, per_node: int) -> dict:
    """tf-ps's cluster across hosts, from each host's offer: its workers on its first ports, its parameter server
    on the next, and node 0's chief on the one after."""
    nodes = range(len(hosts))
    return {"chief": [f"{hosts[0].address}:{hosts[0].ports[per_node + 1]}"],
            "worker": [f"{hosts[n].address}:{hosts[n].ports[local]}" for n in nodes for local in range(per_node)],
            "ps": [f"{hosts[n].address}:{hosts[n].ports[per_node]}" for n in nodes]}


def tf_config(workers: list[str], index: int) -> dict:
    """A worker cluster (every worker's host:port), this process's task index."""
    return {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
