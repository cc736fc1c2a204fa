"""Starting a run: spec file, pinning, ports, the variant's own launcher, timeouts, clean-up.

One launcher invocation per (fake) node, each in its own process group with
that node's GPUs / cores. A run that crashes or hangs has every process it
started killed (found by the run id in their environment, so even processes
that started their own sessions are caught) and becomes a failed row.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bench import devices, results, stats
from bench.devices import Machine, Placement
from bench.task import ACCELERATE_MIXED_PRECISION, SpecError, TaskSpec
from bench.distributed import LOOPBACK_ENV, check_engine
from bench.variants import VARIANTS, Variant, not_applicable
from bench.turns import DUET_NOTE, TURNS_ENV
from bench.worker import FAULT_ENV, LAUNCH_TIME_ENV, NODE_RANK_ENV

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_ID_ENV = "DTBENCH_RUN_ID"
LOG_TAIL_LINES = 12


@dataclass(frozen=True)
class RunSpec:
    variant: Variant
    task: TaskSpec
    device_type: str
    nodes: int = 1
    devices_per_node: int = 1
    cores_per_slot: int = 1
    timeout_s: float = 900.0
    # Real multi-host: this host runs only node `host_node` and meets the others at master_addr.
    host_node: int | None = None
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    # Gradient synchronisation off (each replica trains its own shard): the no-communication bound.
    independent: bool = False
    # What starts the ranks: torchrun (the variant's own launcher), or ray | spark | dask through
    # bench.distributed; engine_address joins an existing cluster instead of starting a local one.
    engine: str = "torchrun"
    engine_address: str | None = None

    @property
    def on_engine(self) -> bool:
        return self.engine != "torchrun"

    @property
    def all_local(self) -> bool:
        """Every node on this host: every listening socket can stay on loopback."""
        return self.host_node is None and self.engine_address is None

    @property
    def local_nodes(self) -> list[int]:
        return list(range(self.nodes)) if self.host_node is None else [self.host_node]

    @property
    def local_ranks(self) -> list[int]:
        per_node = self.processes_per_node
        return [n * per_node + i for n in self.local_nodes for i in range(per_node)]

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def processes_per_node(self) -> int:
        return self.variant.processes_per_node(self.devices_per_node)

    @property
    def label(self) -> str:
        mode = " (independent)" if self.independent else ""
        engine = f" [{self.engine}]" if self.on_engine else ""
        return (f"{self.variant.name}{mode}{engine} {self.nodes}x{self.devices_per_node} {self.device_type} "
                f"{self.task.name}")

    def inapplicable(self) -> str | None:
        return not_applicable(self.variant, self.device_type, self.nodes, self.devices_per_node)

    def check(self, machine: Machine) -> Placement:
        """Everything that can be wrong with the request, as one-line errors, before anything starts."""
        if self.nodes < 1 or self.devices_per_node < 1:
            raise SpecError("devices and nodes must be at least 1")
        if self.task.global_batch % self.world_size:
            raise SpecError(f"global batch {self.task.global_batch} does not divide by world size "
                            f"{self.world_size}: pass --global-batch a multiple of {self.world_size}")
        if self.task.precision == "fp16" and self.device_type != "cuda":
            raise SpecError("fp16 needs CUDA: use --precision bf16 or fp32 on CPU")
        if self.independent and not self.variant.independent:
            raise SpecError(f"{self.variant.name} has no independent (no gradient sync) mode: "
                            "use torch-ddp or accelerate")
        check_engine(self.engine)
        if self.on_engine and not self.variant.engine_entry:
            engines_ok = ", ".join(v.name for v in VARIANTS.values() if v.engine_entry)
            raise SpecError(f"{self.variant.name} runs only under its own launcher: --engine {self.engine} runs "
                            f"{engines_ok}")
        if self.on_engine and self.host_node is not None:
            raise SpecError(f"--engine {self.engine} starts every node itself: drop --node-rank, or use "
                            "the engine's cluster address (--ray-address, --spark-master, --dask-scheduler)")
        if self.host_node is not None:
            if not 0 <= self.host_node < self.nodes:
                raise SpecError(f"--node-rank {self.host_node} is outside 0..{self.nodes - 1}")
            if self.master_port is None:
                raise SpecError("a multi-host run needs --master-port P, the same on every host")
            if self.variant.launcher == "tf-config":
                raise SpecError(f"{self.variant.name} across hosts is not supported yet: its TF_CONFIG needs every "
                                "worker's address; use torch-ddp or accelerate, or fake nodes with --nodes")
        placement = devices.place(self.device_type, len(self.local_nodes), self.devices_per_node, machine,
                                  self.cores_per_slot, self.processes_per_node)
        if self.host_node is None:
            return placement
        [plan] = placement.nodes
        return dataclasses.replace(placement, nodes=(dataclasses.replace(plan, node_rank=self.host_node),))


# ---------------------------------------------------------------- ports and processes

def loopback_listener() -> socket.socket:
    """A socket listening on 127.0.0.1 at a port the OS picks; clients that come early wait in its backlog."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def free_port() -> int:
    """A port free on loopback right now (the OS picks it, so concurrent sweeps don't collide)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_of_run(run_id: str) -> list[int]:
    """Every live process whose environment carries this run id."""
    marker = f"{RUN_ID_ENV}={run_id}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def kill_run(run_id: str, procs: list[subprocess.Popen]) -> None:
    """SIGKILL every process of the run: TF workers ignore SIGTERM, torchrun's children have own sessions."""
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for _ in range(3):  # a dying parent may still fork: sweep until none is left
        pids = processes_of_run(run_id)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    for proc in procs:
        proc.wait()


# ---------------------------------------------------------------- commands

@dataclass(frozen=True)
class Process:
    """One process the harness starts: a node's launcher, or (tf-config) one TF worker."""
    command: list[str]
    env: dict[str, str]
    log_name: str


def tf_config(ports: list[int], index: int) -> dict:
    """The one place TF_CONFIG is built: a worker cluster on loopback, this process's task index."""
    return {"cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
            "task": {"type": "worker", "index": index}}


def accelerate_config(spec: RunSpec, node_rank: int, master_port: int) -> dict:
    """Every setting explicit, so nothing comes from a user-level default config."""
    return {
        "compute_environment": "LOCAL_MACHINE",
        # On CPU too: with ACCELERATE_USE_CPU=true this is the launch that really starts N gloo processes
        # (MULTI_CPU in the config, or --cpu, starts one process on this stack).
        "distributed_type": "MULTI_GPU",
        "num_processes": spec.world_size, "num_machines": spec.nodes, "machine_rank": node_rank,
        "main_process_ip": spec.master_addr, "main_process_port": master_port, "rdzv_backend": "static",
        "same_network": True, "gpu_ids": "all", "use_cpu": False, "debug": False,
        "mixed_precision": ACCELERATE_MIXED_PRECISION[spec.task.precision],
        "downcast_bf16": "no", "main_training_function": "main", "enable_cpu_affinity": False,
        "tpu_use_cluster": False, "tpu_use_sudo": False,
    }


def loopback_store_env(port: int) -> dict[str, str]:
    """torchrun's agents join the run's store at 127.0.0.1:port as clients;
    gloo and nccl bootstrap on loopback. See torch_impl/store.py."""
    return {"TORCHELASTIC_USE_AGENT_STORE": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
            **LOOPBACK_ENV}


def processes(spec: RunSpec, placement: Placement, run_id: str, run_dir: Path, spec_path: Path,
              store_port: int | None = None) -> list[Process]:
    """What to start for each node, with the variant's own launcher (or one engine driver)."""
    python, variant = sys.executable, spec.variant
    if spec.on_engine:  # the engine starts every rank itself; ranks pin themselves from the spec
        env = node_environment(spec, placement.nodes[0], run_id, run_dir)
        env.pop("OMP_NUM_THREADS"), env.pop("MKL_NUM_THREADS")  # sized per rank from its slot
        cmd = [python, "-m", "bench.engines.driver", "--spec", str(spec_path), "--engine", spec.engine]
        if spec.engine_address:
            cmd += ["--address", spec.engine_address]
        return [Process(cmd, env, "driver.log")]
    master_port = store_port or spec.master_port or free_port()
    per_node = spec.processes_per_node
    tf_ports = [free_port() for _ in range(spec.nodes * per_node)] if variant.launcher == "tf-config" else []
    out = []
    for plan in placement.nodes:
        env = node_environment(spec, plan, run_id, run_dir)
        if store_port:
            env.update(loopback_store_env(store_port))
        if variant.launcher == "torchrun":
            cmd = [python, "-m", "torch.distributed.run",
                   f"--nnodes={spec.nodes}", f"--node-rank={plan.node_rank}",
                   f"--nproc-per-node={spec.devices_per_node}",
                   f"--master-addr={spec.master_addr}", f"--master-port={master_port}",
                   "--max-restarts=0", "--monitor-interval=0.5",
                   "-m", variant.module, "--spec", str(spec_path)]
            out.append(Process(cmd, env, f"node{plan.node_rank}.log"))
        elif variant.launcher == "accelerate":
            config_path = run_dir / f"accelerate_config_node{plan.node_rank}.json"
            config_path.write_text(json.dumps(accelerate_config(spec, plan.node_rank, master_port), indent=1))
            if spec.device_type == "cpu":
                env["ACCELERATE_USE_CPU"] = "true"
            cmd = [python, "-m", "accelerate.commands.launch", "--config_file", str(config_path),
                   "-m", variant.module, "--spec", str(spec_path)]
            out.append(Process(cmd, env, f"node{plan.node_rank}.log"))
        elif variant.launcher == "python":
            cmd = [python, "-m", variant.module, "--spec", str(spec_path)]
            out.append(Process(cmd, env, f"node{plan.node_rank}.log"))
        elif variant.launcher == "tf-config":
            # No launcher of TensorFlow's own: every worker is a process given its TF_CONFIG.
            for local in range(per_node):
                index = plan.node_rank * per_node + local
                worker_env = {**env, "TF_CONFIG": json.dumps(tf_config(tf_ports, index)), "RANK": str(index),
                              "LOCAL_RANK": str(local), "WORLD_SIZE": str(len(tf_ports))}
                if plan.cuda_visible and per_node > 1:  # one worker per GPU: it must see only its own
                    worker_env["CUDA_VISIBLE_DEVICES"] = plan.cuda_visible[local]
                cmd = [python, "-m", variant.module, "--spec", str(spec_path)]
                out.append(Process(cmd, worker_env, f"node{plan.node_rank}-worker{local}.log"))
        else:
            raise SpecError(f"variant {variant.name} names an unknown launcher {variant.launcher!r}")
    return out


def node_environment(spec: RunSpec, plan: devices.NodePlan, run_id: str, run_dir: Path) -> dict[str, str]:
    """Only what the harness sets: recorded with the command so the launch can be re-run by hand."""
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    threads = str(plan.threads)
    env = {
        RUN_ID_ENV: run_id, NODE_RANK_ENV: str(plan.node_rank), "PYTHONPATH": pythonpath,
        "PYTHONUNBUFFERED": "1",
        # torchrun leaves a torchelastic_* folder per run in TMPDIR: keep it in the run directory.
        "TMPDIR": str(run_dir / "tmp"),
        # Size every thread pool to the slot: an oversized OpenMP pool collapses under contention.
        "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
        # Never let a CPU run touch a GPU, and let a GPU node see only its own GPUs.
        "CUDA_VISIBLE_DEVICES": ",".join(plan.cuda_visible) if plan.cuda_visible is not None else "",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    return env


def write_spec(spec: RunSpec, placement: Placement, run_id: str, run_dir: Path, data_path: Path | None) -> Path:
    doc = {
        "run_id": run_id, "variant": spec.variant.name, "task": spec.task.to_dict(),
        "data_path": str(data_path) if data_path else None, "device_type": spec.device_type,
        "nodes": spec.nodes, "devices_per_node": spec.devices_per_node, "world_size": spec.world_size,
        "run_dir": str(run_dir), "oversubscribed": placement.oversubscribed, "independent": spec.independent,
        "engine": spec.engine,
        "node_plans": [{"node_rank": p.node_rank, "cuda_visible": p.cuda_visible, "cpu_slots": p.cpu_slots}
                       for p in placement.nodes],
    }
    path = run_dir / "spec.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


# ---------------------------------------------------------------- one run

def start_store_host(spec: RunSpec, run_id: str, run_dir: Path) -> tuple[subprocess.Popen, int] | None:
    """For torchrun runs all on this host: the rendezvous store on a socket bound to 127.0.0.1 (torch's
    own would listen on every interface). Killed with the run. Not for `accelerate launch`: it checks
    that its port is free first, and on one machine moves to another port, on several refuses."""
    if spec.on_engine or not spec.all_local or spec.variant.launcher != "torchrun":
        return None
    with loopback_listener() as sock, open(run_dir / "store.log", "wb") as log_file:
        proc = subprocess.Popen(
            [sys.executable, "-m", "torch_impl.store", "--fd", str(sock.fileno())], pass_fds=[sock.fileno()],
            env={**os.environ, RUN_ID_ENV: run_id, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT,
            stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return proc, sock.getsockname()[1]


def new_run_id(spec: RunSpec) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{spec.variant.name}-{spec.nodes}x{spec.devices_per_node}-{uuid.uuid4().hex[:6]}"


def base_row(spec: RunSpec, run_id: str, status: str, error: str | None = None) -> results.ResultRow:
    return results.ResultRow(
        run_id=run_id, started_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), status=status,
        error=error, variant=spec.variant.name, framework=spec.variant.framework,
        launcher=spec.engine if spec.on_engine else spec.variant.launcher,
        # Variants no engine runs keep "local": their own launcher is all there is.
        engine=spec.engine if spec.variant.engine_entry else "local",
        device_type=spec.device_type, nodes=spec.nodes,
        devices_per_node=spec.devices_per_node, world_size=spec.world_size,
        task={**spec.task.to_dict(), "per_device_batch": spec.task.global_batch // spec.world_size},
        warmup_steps=spec.task.warmup_steps, window_steps=spec.task.window_steps, windows=spec.task.windows,
        git_sha=results.git_sha(REPO_ROOT), host=results.host())


@dataclass
class Launched:
    """A finished launch: what ran, how it ended, and what every local rank reported."""
    run_id: str
    run_dir: Path
    placement: Placement
    command: str
    status: str            # ok | failed | timeout
    reason: str | None
    records: dict
    launch_time: float
    wall_s: float


def start_and_wait(spec: RunSpec, out_dir: Path, machine: Machine, data_path: Path | None) -> Launched:
    """Start every process of the run, wait with the timeout, kill whatever is left."""
    placement = spec.check(machine)
    run_id = new_run_id(spec)
    run_dir = (out_dir / "runs" / run_id).resolve()
    (run_dir / "tmp").mkdir(parents=True)
    spec_path = write_spec(spec, placement, run_id, run_dir, data_path)
    store = start_store_host(spec, run_id, run_dir)
    procs_to_start = processes(spec, placement, run_id, run_dir, spec_path, store[1] if store else None)
    background = " &" if len(procs_to_start) > 1 else ""
    command = " ; ".join(
        "env " + " ".join(f"{k}={shlex.quote(v)}" for k, v in p.env.items() if k != RUN_ID_ENV)
        + " " + shlex.join(p.command) + background for p in procs_to_start)
    launch_time = time.time()
    procs, logs = [], []
    for p in procs_to_start:
        logs.append(run_dir / p.log_name)
        with open(logs[-1], "wb") as log_file:
            procs.append(subprocess.Popen(
                p.command, env={**os.environ, **p.env, LAUNCH_TIME_ENV: repr(launch_time)}, cwd=REPO_ROOT,
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
    status, reason = _wait(procs, launch_time, spec.timeout_s, logs)
    kill_run(run_id, procs + ([store[0]] if store else []))
    return Launched(run_id, run_dir, placement, command, status, reason, results.read_rank_records(run_dir),
                    launch_time, time.time() - launch_time)


def execute(spec: RunSpec, out_dir: Path, machine: Machine, data_path: Path | None,
            environment: dict | None = None) -> results.ResultRow:
    """Launch one run and fold its reports into a row (never raises on a failed run)."""
    run = start_and_wait(spec, out_dir, machine, data_path)
    row = base_row(spec, run.run_id, "failed")
    row.environment = dict(environment or results.environment())
    row.oversubscribed = run.placement.oversubscribed
    row.independent = spec.independent
    row.notes.extend(run.placement.warnings)
    if spec.device_type == "cpu" and spec.variant.cpu_limit_reason:
        row.notes.append(f"cpu: {spec.variant.cpu_limit_reason}")
    if os.environ.get(FAULT_ENV):
        row.notes.append(f"fault injected: {os.environ[FAULT_ENV]}")
    if os.environ.get(TURNS_ENV):
        row.notes.append(DUET_NOTE)
    row.command, row.wall_s = run.command, run.wall_s

    if run.status == "ok" and 0 not in spec.local_ranks:
        row.status = "ok"  # rank 0's host measures; this host only ran its share
        row.notes.append(f"node {spec.host_node}'s share of a multi-host run: the row is collected on node 0's host")
        return row
    if run.status == "ok":
        try:
            measured = results.fold(run.records, spec.world_size, spec.local_ranks, run.launch_time)
        except results.FoldError as exc:
            row.error = str(exc)
            return row
        row.environment.update(measured.pop("worker_info"))
        row.task["params"] = measured.pop("params")
        for key, value in measured.items():
            setattr(row, key, value)
        row.status = "ok"
        return row
    row.status = run.status
    rank_error = results.first_error(run.records) if run.status == "failed" else None
    # Which process died and how, then the error a rank reported (or, without one, the log's last lines).
    row.error = f"{run.reason.splitlines()[0]}\n{rank_error}" if rank_error else run.reason
    return row


def _wait(procs: list[subprocess.Popen], started: float, timeout_s: float,
          logs: list[Path]) -> tuple[str, str | None]:
    """Wait for every node; stop at the first failure or at the timeout."""
    while True:
        codes = [p.poll() for p in procs]
        # A process killed by a signal is the likelier root cause than one that failed after it.
        failed = sorted(((i, c) for i, c in enumerate(codes) if c not in (None, 0)), key=lambda ic: ic[1] > 0)
        if failed:
            index, code = failed[0]
            how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
            return "failed", f"{logs[index].stem} {how}:\n{_tail(logs[index])}"
        if all(c == 0 for c in codes):
            return "ok", None
        if time.time() - started > timeout_s:
            waiting = [i for i, c in enumerate(codes) if c is None]
            names = ", ".join(logs[i].stem for i in waiting)
            return "timeout", (f"no result within the {timeout_s:.0f}s timeout; {names} still running, "
                               f"all killed:\n{_tail(logs[waiting[0]])}")
        time.sleep(0.2)


def add_scaling(store: results.ResultStore, row: results.ResultRow, variant: Variant) -> None:
    """Efficiency vs the variant's own 1-device run and vs its framework's plain single-device loop."""
    if row.status != "ok" or not row.throughput or row.independent:
        return
    median = row.throughput["median"]
    row.scaling_efficiency = stats.scaling_efficiency(median, row.world_size, store.baseline_throughput(row))
    if variant.baseline:
        single = store.baseline_throughput(row, variant.baseline)
        row.scaling_efficiency_vs_single = stats.scaling_efficiency(median, row.world_size, single)
