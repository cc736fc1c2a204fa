"""Run a function on N ranks with the process group already initialised, through an engine.

    from bench import engines
    values = engines.run(fn, 3, devices=2, engine="dask")   # [fn(3) on rank 0, fn(3) on rank 1]

In the spirit of Spark's `TorchDistributor(...).run(fn, *args)`: `fn` runs once per rank with
`torch.distributed` initialised (gloo on CPU, nccl on CUDA) and `RANK`, `LOCAL_RANK`, `WORLD_SIZE` set,
and the group is torn down after it. Every rank's return value comes back, all-gathered over the
group (Spark returns only one rank's value, Ray Train none). A rank that raises fails the call with a
`RankFailed` naming that rank; the engine stops the other ranks rather than let them wait in a collective.

When every rank is on this host the group meets through a `file://` store in a fresh temporary
directory, so no rendezvous socket listens on any interface; across hosts it uses the engine's address.
This module imports no framework at top level: torch is imported inside the ranks.
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import traceback
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from bench.hosts.loopback import LOOPBACK_ENV
from bench.spec.task import SpecError
from bench.spec.variants import check_engine
from bench.worker import HANDOVER_ENV, NODE_RANK_ENV
from bench.worker.gpus import CUDA_DEVICE_ENV, cuda_index, visible_gpus

# Which pip extra brings each engine, for the one-line error when it is missing.
ENGINE_EXTRAS = {"ray": "ray", "spark": "spark", "dask": "dask", "torchrun": "torch"}


PEER_DEATH_GRACE_S = 2.0  # several of torchrun's 0.5 s monitor polls


class RankFailed(RuntimeError):
    """A rank's function raised: which rank, and its traceback."""

    def __init__(self, rank: int, message: str):
        super().__init__(f"rank {rank} failed: {message}")
        self.rank = rank

    def __reduce__(self):  # picklable across engine boundaries with its fields
        return (RankFailed, (self.rank, str(self).split(": ", 1)[1]))


@dataclass(frozen=True)
class Group:
    """What every rank needs to join the process group."""
    world_size: int
    nodes: int
    device_type: str           # cpu | cuda
    rendezvous: str | None     # file://... all ranks local; tcp://... rank 0 of a Dask cluster; None: the engine's (env://)
    timeout_s: float
    failure_dir: str | None = None  # all ranks local: a failing rank also leaves its error here
    # CUDA, every rank on this host: each (fake) node's GPUs, so a rank sees its node's as under torchrun.
    node_gpus: tuple[tuple[str, ...], ...] | None = None
    first_visible_is_own: bool = False  # dask-cuda's workers: CUDA_VISIBLE_DEVICES rotated, the own GPU first

    @property
    def per_node(self) -> int:
        return self.world_size // self.nodes

    @property
    def backend(self) -> str:
        return "nccl" if self.device_type == "cuda" else "gloo"


def rank_main(group: Group, rank: int, fn: Callable, args: tuple, kwargs: dict, own_gpu: str | None = None) -> list:
    """Inside one rank: set the environment, join the group, run fn, all-gather every rank's value.
    `own_gpu`: the GPU the engine gave this rank (Ray), as CUDA_VISIBLE_DEVICES names it."""
    # The engine's start-up ends here (its cluster, its scheduling of this rank): torch's import and the process
    # group are the same under every engine.
    os.environ[HANDOVER_ENV] = repr(time.time())
    import torch
    import torch.distributed as dist

    local_rank = rank % group.per_node
    node = str(rank // group.per_node)
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(local_rank), WORLD_SIZE=str(group.world_size),
                      LOCAL_WORLD_SIZE=str(group.per_node), GROUP_RANK=node, **{NODE_RANK_ENV: node})
    if group.rendezvous and group.rendezvous.startswith("file://"):  # a local cluster: every rank on this host
        os.environ.update(LOOPBACK_ENV)
    if group.device_type == "cuda":
        index = choose_gpu(group, int(node), local_rank, own_gpu, torch.cuda.device_count)
        os.environ[CUDA_DEVICE_ENV] = str(index)  # what the variant's code trains on (Worker.cuda_device)
        torch.cuda.set_device(index)
    if not dist.is_initialized():  # Ray Train's backend (ours) may have done it already
        dist.init_process_group(group.backend, init_method=group.rendezvous or "env://", rank=rank,
                                world_size=group.world_size, timeout=timedelta(seconds=group.timeout_s))
    try:
        value = fn(*args, **kwargs)
    except BaseException as exc:  # noqa: BLE001 - name the rank, keep the traceback
        message = "".join(traceback.format_exception(exc))[-3000:].strip()
        if group.failure_dir:  # which rank failed first; and for engines that hand back only "see the logs" (Spark)
            Path(group.failure_dir, f"failed-rank{rank}.json").write_text(
                json.dumps({"rank": rank, "time_ns": time.time_ns(), "message": message}))
        # The group is left as it is: tearing it down would fail the peers' collectives with errors of
        # their own that could reach the engine first and hide this one. The engine stops them. A moment's
        # wait first: when a peer died without raising (killed, out of memory) and broke this rank's
        # collective, the engine must see that death before this exit (torchrun reports the first exit its
        # poll finds: under load it found this one and named the wrong rank).
        time.sleep(PEER_DEATH_GRACE_S)
        raise RankFailed(rank, message) from None
    try:
        # Every rank gets every value: Spark's local mode lets each rank write its return value to one
        # shared output file (the last writer wins), so each must hold the whole list.
        values = [None] * group.world_size
        dist.all_gather_object(values, value)
        return values
    finally:
        dist.destroy_process_group()


def choose_gpu(group: Group, node: int, local_rank: int, own_gpu: str | None,
               device_count: Callable[[], int]) -> int:
    """The rank's GPU index, from what its process can see (`bench.worker.gpus.cuda_index`). Called before
    CUDA starts in this process, so narrowing CUDA_VISIBLE_DEVICES to the node's GPUs still counts."""
    if own_gpu is None and group.node_gpus:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(group.node_gpus[node])
    visible = visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), device_count())
    if own_gpu is None and group.first_visible_is_own and visible:
        own_gpu = visible[0]
    return cuda_index(visible, local_rank, own_gpu)


def rank_main_from_env(group: Group, fn: Callable, args: tuple, kwargs: dict) -> list:
    """`rank_main` for engines whose ranks are torchrun processes (Spark's TorchDistributor, our
    torchrun engine): the rank comes from the RANK torchrun set."""
    return rank_main(group, int(os.environ["RANK"]), fn, args, kwargs)


def run(fn: Callable, *args: Any, devices: int = 2, nodes: int = 1, engine: str = "dask",
        device_type: str = "cpu", timeout_s: float = 600.0, address: str | None = None,
        run_dir: str | os.PathLike | None = None, node_gpus: list[list[str]] | None = None, **kwargs: Any) -> list:
    """fn(*args, **kwargs) on `devices` ranks over `nodes` nodes through `engine`; every rank's value.

    `address`: an existing cluster (a Ray address, a Spark master URL, a Dask scheduler); None starts a
    local one for this call and shuts it down after. `run_dir` holds the engine's files (default: a
    fresh temporary directory). `node_gpus` (CUDA, local cluster): each node's GPUs, as this process names them."""
    check_engine(engine)
    if devices < 1 or nodes < 1 or devices % nodes:
        raise SpecError(f"devices ({devices}) must be a positive multiple of nodes ({nodes})")
    work = Path(run_dir or tempfile.mkdtemp(prefix="dtbench-dist-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    local = address is None
    # A fresh file per call: a FileStore file left from an earlier group would be joined by mistake.
    call = uuid.uuid4().hex[:8]
    rendezvous = f"file://{work / f'rendezvous-{call}'}" if local else None
    failures = work / f"failures-{call}"  # this call's: a reused run_dir's older errors are not read as its own
    if local:
        failures.mkdir()
    gpus = tuple(map(tuple, node_gpus)) if node_gpus and local and device_type == "cuda" else None
    group = Group(devices, nodes, device_type, rendezvous, timeout_s, str(failures) if local else None, gpus)
    backend = _engine(engine)
    try:
        values = backend.run(group, fn, args, kwargs, address=address, work=work)
    except Exception as exc:  # noqa: BLE001 - engines wrap a rank's error in their own types
        failure = cause(rank_failure(exc), first_failure_file(failures) if local else None)
        if failure is None:
            raise
        raise failure from None
    if not isinstance(values, list) or len(values) != devices:
        raise RuntimeError(f"engine {engine} returned {values!r}, not one value per rank")
    return values


def rank_failure(exc: BaseException) -> RankFailed | None:
    """The RankFailed inside an engine's error: in its cause chain (Dask, Ray), or only in its text
    (Spark and torchrun hand back the failed process's output)."""
    seen = set()
    stack = [exc]
    while stack:
        current = stack.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, RankFailed):
            return current
        stack += [current.__cause__, current.__context__, *getattr(current, "worker_failures", {}).values()]
    match = re.search(r"rank (\d+) failed: (.*)", str(exc), re.DOTALL)
    return RankFailed(int(match.group(1)), match.group(2).strip()) if match else None


def first_failure_file(failures: Path) -> tuple[RankFailed, set[int]] | None:
    """The earliest error a local rank's function raised (by the time it wrote), and every rank that wrote one."""
    found = sorted((json.loads(f.read_text()) for f in failures.glob("failed-rank*.json")), key=lambda f: f["time_ns"])
    return (RankFailed(found[0]["rank"], found[0]["message"]), {f["rank"] for f in found}) if found else None


def cause(picked: RankFailed | None, first_raised: tuple[RankFailed, set[int]] | None) -> RankFailed | None:
    """The failure to name: the engine's pick, unless that rank's function raised too and another raised first.
    A peer whose collective broke fails a moment after the cause, and an engine may hand that one back
    (torchrun keeps the lowest rank among failures stamped in the same second); a rank that died without
    raising (killed, out of memory, crashed) leaves no file, and the engine's pick stands."""
    if first_raised is None:
        return picked
    earliest, raised = first_raised
    return earliest if picked is None or picked.rank in raised else picked


def _engine(name: str):
    """The engine's adapter module; a missing extra is a one-line error naming it."""
    import importlib

    try:
        return importlib.import_module(f"bench.engines.{name}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("bench"):
            raise
        from bench import install

        raise SpecError(f"engine {name} needs the {ENGINE_EXTRAS[name]!r} extra ({exc.name} is missing): "
                        f"{install.hint(ENGINE_EXTRAS[name])}") from None
