"""The training loop of the PyTorch variants, top to bottom.

A variant builds its model the way its approach does (DDP, DataParallel, FSDP, DeepSpeed's engine, Fabric, no
wrapper) and hands the loop one small `Approach`: the wrapped model and the module inside it, the collectives
the loop needs (a device-sync-and-barrier for the clock's window boundaries, a sum-all-reduce for exact
evaluation), its step where it has one of its own, and where a wrapper owns the data too (Accelerate's
prepared loaders), its input and evaluation. The epoch loop, the batch loop and the clock calls are here.
"""
from __future__ import annotations

import contextlib
import copy
import functools
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from bench.spec.task import TaskSpec
from bench.worker import Worker, cpu_model, exit_now, peak_rss_mb, spec_path_from_argv
from bench.worker.kernels import as_shipped
from torch_impl import data, kernels, loader_workers, memory, mlflow_model, own_time
from torch_impl.fast_path import CUDA_SWITCHES, switch_on
from torch_impl.checkpoint import TorchCheckpoint
from torch_impl.flops import flops_per_sample
from torch_impl.model import count_parameters
from torch_impl.profile import TorchProfiler, region
from torch_impl.recipe import make_optimizer, make_scheduler

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Approach:
    """What an approach adds to the loop. The defaults are the plain loop's on one device; `Distributed` is
    every torchrun-style rank's."""
    precision_in_model = False  # it casts to its own precision (FSDP's policy, ZeRO's model): no autocast
    lockstep_eval = False       # every forward is a collective (sharded parameters): ranks evaluate in step
    channels_last = True        # False where the approach needs contiguous parameters (FSDP2, ZeRO)
    has_own_step = False        # its wrapper runs backward and the update (`step`): DeepSpeed's engine, Fabric
    every_visible_gpu = False   # one process drives every visible GPU (DataParallel): its memory is theirs
    compiles_itself = False     # its wrapper applies --compile (Accelerate's dynamo plugin)
    fused_optimizer = True      # False where the fused step does not take its parameters (FSDP2's DTensors)

    def __init__(self, model: nn.Module, raw_model: nn.Module, device: torch.device, rank: int = 0,
                 world_size: int = 1, optimizer: torch.optim.Optimizer | None = None):
        self.model, self.raw_model, self.device = model, raw_model, device  # raw: evaluation, parameter count
        self.rank, self.world_size = rank, world_size  # which shard of every batch and of the test set it reads
        self.optimizer = optimizer  # the one its wrapper holds (the schedule steps it); None: the task's, made here
        self.clock = None  # the run's clock, once made: whether this step's window is one to undo

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def all_reduce_sum(self, totals: torch.Tensor) -> None:
        pass

    def no_sync(self) -> contextlib.AbstractContextManager:
        """Gradient synchronisation off (independent runs, the no-communication bound)."""
        return contextlib.nullcontext()

    def sync_off(self) -> contextlib.AbstractContextManager | None:
        """Gradient synchronisation off for one window the input phases then undo (bench.worker.clock.Undo), the
        exposed communication's bound in the run itself; None: the approach cannot switch it off."""
        return None

    def step_sync(self) -> contextlib.AbstractContextManager:
        """What a step runs under: its sync switched off while the clock trains a window it will undo."""
        undoing = self.clock is not None and self.clock.discarding
        return self.sync_off() if undoing else self.no_sync()

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError  # only where has_own_step

    def input(self, worker: Worker, batch: int, pin_memory: bool) -> tuple[DataLoader, DataLoader, Callable[[int], None]]:
        """(train loader, test loader, the train order's set_epoch): the same data-order policy for every
        variant (`data.train_loader`), and this rank's exact share of the test set."""
        train_set, test_set = data.load_splits(worker.spec)
        loader = data.train_loader(train_set, batch, self.rank, self.world_size, worker.task.recipe.seed, pin_memory,
                                   worker.loader_workers)
        # One evaluation loader for the run: a file input's workers stay up from one evaluation to the next.
        test_loader = data.eval_loader(test_set, self.rank, self.world_size, self.device.type == "cuda",
                                       worker.loader_workers)
        return loader, test_loader, loader.sampler.set_epoch

    def evaluate(self, test_loader: DataLoader, amp_dtype: torch.dtype | None, running_loss: "RunningLoss") -> dict:
        return evaluate(self.raw_model, test_loader, self.device, amp_dtype, self.all_reduce_sum, running_loss,
                        self.lockstep_eval)

    def schedule(self, scheduler: torch.optim.lr_scheduler.LRScheduler) -> torch.optim.lr_scheduler.LRScheduler:
        """The task's schedule as the wrapper steps it."""
        return scheduler

    def checkpoint(self, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, scheduler):
        """Model, optimizer, scaler and schedule saved the approach's own way (bench.worker.Checkpoint)."""
        return TorchCheckpoint(self.raw_model, optimizer, scaler, self.device, self.rank, self.sync, scheduler)

    def model_state(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
        """Bytes of the model state this rank holds (memory.model_state_bytes)."""
        return memory.model_state_bytes(model, optimizer)

    def full_state_dict(self) -> dict[str, torch.Tensor] | None:
        """--mlflow: the trained model's whole state on rank 0, on the CPU (None on the other ranks). Every rank
        calls it: a sharding wrapper gathers the state with a collective (ZeRO-3's partitions: full_state)."""
        state = mlflow_model.full_state(self.raw_model)
        return state if self.rank == 0 else None


class Distributed(Approach):
    """A rank of a process group (torchrun, an engine, DeepSpeed's or Fabric's launcher)."""

    def sync(self) -> None:
        super().sync()
        dist.barrier()

    def all_reduce_sum(self, totals: torch.Tensor) -> None:
        dist.all_reduce(totals)


def train(worker: Worker, approach: Approach) -> dict:
    """Train the task under `approach`."""
    task, device, model, raw_model = worker.task, approach.device, approach.model, approach.raw_model
    batch = task.recipe.global_batch // approach.world_size  # what this process loads per step
    settings = {**fast_path(device, task), **({} if approach.channels_last else {"channels_last": False})}
    optimizer = (make_optimizer(model, task, fused=settings["fused_optimizer"] and approach.fused_optimizer)
                 if approach.optimizer is None else approach.optimizer)
    settings["fused_optimizer"] = fused(optimizer)
    amp_dtype = None if approach.precision_in_model else AMP_DTYPES.get(task.recipe.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=task.recipe.precision == "fp16")
    if task.options.compile and not approach.compiles_itself:  # the wrapped model, as torch.compile's docs for DDP say
        model = torch.compile(model)
    step = approach.step if approach.has_own_step else functools.partial(
        train_step, model, optimizer, scaler, amp_dtype, device=device, no_sync=approach.step_sync)
    if worker.synthetic:  # one batch made on the device: no input pipeline, no evaluation
        loader = data.synthetic_batches(task, batch, device, worker.timed_steps, approach.rank)
        test_loader, set_epoch, epochs = None, None, 1
    else:
        loader, test_loader, set_epoch = approach.input(worker, batch, settings["pin_memory"])
        loader = data.at_most(loader, task.recipe.steps_per_epoch)
        epochs = task.recipe.epochs
    scheduler = approach.schedule(make_scheduler(optimizer, task, len(loader), epochs))
    checkpoint = approach.checkpoint(optimizer, scaler, scheduler)
    first_epoch = worker.restore(checkpoint)  # 0, or the epoch after a resumed run's last checkpoint
    profiler = TorchProfiler(worker, device) if worker.profile_windows else None
    # A rank's own time is its forward, except where the forward all-gathers the parameters (lockstep).
    clock = worker.clock(task.recipe.global_batch, approach.sync, steps=(epochs - first_epoch) * len(loader),
                         on_warmup_done=lambda: memory.reset_peak(device, approach.every_visible_gpu),
                         profiler=profiler, own_timer=None if approach.lockstep_eval else own_time.keep(device),
                         resident=functools.partial(resident, device=device),
                         unsynced=Undo(raw_model, optimizer, scheduler, scaler)
                         if approach.world_size > 1 and approach.sync_off() is not None else None)
    approach.clock = clock
    running_loss = RunningLoss(device)
    evaluate_exactly = None if test_loader is None else (
        lambda: approach.evaluate(test_loader, amp_dtype, running_loss))

    model.train()
    clock.start()
    # The data order is the epoch's: a resumed run reads on where it was.
    evaluation, epochs_run = run_epochs(worker, clock, loader, step, scheduler, running_loss,
                                        range(first_epoch, epochs), evaluate_exactly, checkpoint, set_epoch)
    if worker.logs_model:  # --mlflow: rank 0 saves the trained model; no rank leaves before it is written
        mlflow_model.save(worker, approach.full_state_dict())
        approach.sync()
    return finish(worker, clock, evaluation, epochs_run, device, raw_model, approach.rank == 0, settings,
                  approach.model_state(model, optimizer), profiler, approach.every_visible_gpu)


def run_epochs(worker: Worker, clock, loader, step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
               scheduler, running_loss: "RunningLoss", epochs: range, evaluate_exactly: Callable[[], dict] | None,
               checkpoint, set_epoch: Callable[[int], None] | None) -> tuple[dict | None, int]:
    """The epochs from `epochs.start` on: (the last evaluation, the epoch count the run reached)."""
    loss_curve = worker.loss_curve(epochs.start * len(loader))
    evaluation, epoch = None, epochs.start
    for epoch in epochs:
        if set_epoch is not None:
            set_epoch(epoch)
        for images, labels in clock.timed(loader):
            loss = step(images, labels)
            if clock.discarding:  # a window trained with its sync off, to be undone: it counts nowhere
                continue
            scheduler.step()
            running_loss.add(loss)
            loss_curve.add(loss.detach(), clock)
        # The clock pauses meanwhile: the checkpoint (if the task asks) and the exact evaluation.
        evaluation = worker.end_epoch(clock, epoch, epochs.stop, evaluate_exactly, checkpoint)
        if clock.stop:
            break
    return evaluation, epoch + 1


def finish(worker: Worker, clock, evaluation: dict | None, epochs_run: int, device: torch.device,
           raw_model: nn.Module, main_process: bool, settings: dict, model_state: dict,
           profiler: TorchProfiler | None = None, every_visible_gpu: bool = False) -> dict:
    """The rank's record: the clock's figures, the evaluation, memory, parameters, (rank 0) FLOPs and, with
    --profile, where the profiled step's time went."""
    peaks = memory.device_peaks(device, every_visible_gpu)
    return worker.finish(clock, evaluation, epochs_run, peaks["peak_allocated_mb"] if peaks else peak_rss_mb(),
                         count_parameters(raw_model), flops_per_sample(worker.task) if main_process else None,
                         settings, memory={"model_state_bytes": model_state, **peaks},
                         **({"profile": profiler.result} if profiler else {}))


def fast_path(device: torch.device, task: TaskSpec) -> dict:
    """PyTorch's performance-guide settings for this device, switched on (--as-shipped: left as torch ships
    them; the audit's variables: each one on or off), and what the row records."""
    cuda = device.type == "cuda"
    on = {name: switch_on(name, device.type, as_shipped()) for name in CUDA_SWITCHES}
    if cuda:
        torch.backends.cudnn.benchmark = on["cudnn_benchmark"]  # the fastest conv algorithms for these fixed shapes
        torch.backends.cuda.matmul.allow_tf32 = on["tf32"]       # fp32 matmuls and convolutions on TF32 tensor cores
        torch.backends.cudnn.allow_tf32 = on["tf32"]
    return {"channels_last": data.channels_last(device), **on, "pin_memory": cuda, "compile": bool(task.options.compile),
            "persistent_workers": bool(task.data.loader_workers),
            "loader_start": loader_workers.START_METHOD if task.data.loader_workers else None}


def fused(optimizer: torch.optim.Optimizer) -> bool:
    """Whether the optimizer steps in one fused kernel (what the row records: what ran, not what was asked)."""
    inner = getattr(optimizer, "optimizer", optimizer)  # a wrapper's (Accelerate's) torch optimizer
    return bool(getattr(inner, "defaults", {}).get("fused"))


def cast_inputs(model: nn.Module, dtype: torch.dtype) -> None:
    """A model held in bf16/fp16 (DeepSpeed's precision modes) casts its inputs as they enter."""
    model.register_forward_pre_hook(lambda module, args: tuple(a.to(dtype) for a in args))


def place(model: nn.Module, device: torch.device) -> nn.Module:
    """The model on its device, in the device's memory format (channels_last where that is the fast path)."""
    return model.to(device, memory_format=data.memory_format(device))


class Undo:
    """What a window trained with gradient synchronisation off changes, saved before it and put back after
    (bench.worker.clock.Undo): the weights and buffers, the optimizer's state, the schedule, the loss scale and the
    random state, so that training goes on as if the window had not been."""

    def __init__(self, model: nn.Module, optimizer, scheduler, scaler: torch.amp.GradScaler):
        self.model, self.optimizer, self.scheduler, self.scaler = model, optimizer, scheduler, scaler
        self.saved = None

    def save(self) -> None:
        self.saved = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.optimizer.state_dict()),
                      self.scheduler.state_dict(), self.scaler.state_dict(), torch.get_rng_state(),
                      torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)

    def restore(self) -> None:
        model, optimizer, scheduler, scaler, rng, cuda_rng = self.saved
        self.model.load_state_dict(model)
        self.optimizer.load_state_dict(optimizer)
        self.scheduler.load_state_dict(scheduler)
        self.scaler.load_state_dict(scaler)
        torch.set_rng_state(rng)
        if cuda_rng is not None:
            torch.cuda.set_rng_state_all(cuda_rng)
        self.saved = None


def resident(batch: tuple[torch.Tensor, torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch as the input phases' resident windows feed it: on the device already, as the loader gave it (uint8
    images, int labels), so that the step's own conversion still runs and only the input pipeline is left out."""
    images, labels = batch
    return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               amp_dtype: torch.dtype | None, images: torch.Tensor, labels: torch.Tensor, device: torch.device,
               no_sync: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> torch.Tensor:
    """One step (the function pytest-benchmark times): uint8 batch in, loss out, weights updated."""
    with region("input"):
        x = data.to_model_input(images, device)
        y = labels.to(device, non_blocking=True)
    with region("optimizer"):
        optimizer.zero_grad(set_to_none=True)
    with no_sync():
        with region("forward"), autocast(device, amp_dtype):
            loss = F.cross_entropy(model(x), y)
        with region("backward"):
            scaler.scale(loss).backward()
        with region("optimizer"):
            scaler.step(optimizer)
            scaler.update()
    return loss


@torch.no_grad()
def evaluate(raw_model: nn.Module, test_loader: DataLoader, device: torch.device, amp_dtype: torch.dtype | None,
             all_reduce_sum: Callable[[torch.Tensor], None], running_loss: "RunningLoss",
             lockstep: bool = False) -> dict:
    """Exact accuracy: every test sample once across ranks (`data.eval_loader`: this rank's share), summed to
    every rank (with the training loss since the last evaluation). In `lockstep` a rank whose share has
    fewer batches runs empty forwards until the others are done (a sharded model's forward is a collective)."""
    raw_model.eval()
    totals = torch.zeros(5, dtype=torch.float64, device=device)
    mine = iter(test_loader)
    rounds = torch.tensor(len(test_loader), device=device)
    if lockstep:
        dist.all_reduce(rounds, op=dist.ReduceOp.MAX)
    for _ in range(int(rounds)):
        images, labels = next(mine, (None, None))
        if images is None:  # this rank's share is done: an empty batch keeps it in step with the others
            empty = torch.zeros_like(test_loader.dataset[0][0][None])  # one uint8 HWC image
            with autocast(device, amp_dtype):
                raw_model(data.to_model_input(empty, device))
            continue
        x = data.to_model_input(images, device)
        y = labels.to(device)
        with autocast(device, amp_dtype):
            logits = raw_model(x)
        totals[0] += (logits.argmax(1) == y).sum()
        totals[1] += len(y)
        totals[2] += F.cross_entropy(logits.float(), y, reduction="sum")
    totals[3], totals[4] = running_loss.take()
    all_reduce_sum(totals)
    raw_model.train()
    correct, count, loss_sum, train_loss_sum, batches = totals.tolist()
    return {"test_accuracy": correct / count, "test_loss": loss_sum / count, "eval_samples": int(count),
            "train_loss": train_loss_sum / max(batches, 1)}


class RunningLoss:
    """The training loss summed on the device (no sync inside a window), taken at each evaluation."""

    def __init__(self, device: torch.device):
        self.sum, self.batches = torch.zeros((), device=device), 0

    def add(self, loss: torch.Tensor) -> None:
        self.sum += loss.detach().float()
        self.batches += 1

    def take(self) -> tuple[torch.Tensor, int]:
        """The sum and the batch count since the last call; both restart from zero."""
        taken = self.sum.clone(), self.batches
        self.sum.zero_()
        self.batches = 0
        return taken


def autocast(device: torch.device, amp_dtype: torch.dtype | None):
    return torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None)


def device_info(device: torch.device) -> dict:
    """What the row records about the framework and the device this process trains on."""
    info = {"framework_version": torch.__version__, "device": str(device), "threads": torch.get_num_threads(),
            "kernels": kernels.report(device)}
    if device.type == "cuda":
        info.update(device_name=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.distributed.is_nccl_available() else None)
    else:
        info.update(device_name=cpu_model())
    return info


def join_process_group(worker: Worker) -> tuple[int, int, torch.device]:
    """A torchrun rank's process group (env://; an engine's already exists) and its device: (rank, world size,
    device)."""
    cuda = worker.device_type == "cuda"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", worker.cuda_device(torch.cuda.device_count())) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
        memory.cap(device, worker.task.options.device_memory_gib)
    worker.joined(dist.get_world_size(), backend=dist.get_backend(), **device_info(device))
    return dist.get_rank(), dist.get_world_size(), device


def run_rank(train_rank: Callable[[str], dict]) -> None:
    """A process-group rank's main: train, leave the group, and exit at once (gloo's abort at exit)."""
    train_rank(spec_path_from_argv())
    dist.destroy_process_group()
    exit_now(0)


def set_threads(threads: int) -> None:
    # Size torch's pools to the slot: an oversized OpenMP pool collapses under contention.
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(max(1, min(threads, 2)))
    except RuntimeError:
        pass  # already set by an earlier parallel op in this process


def single_process_device(worker: Worker) -> torch.device:
    """Pin this process and size its pools; it trains on the first visible GPU, or the CPU."""
    set_threads(worker.pin())
    device = torch.device("cuda", 0) if worker.device_type == "cuda" else torch.device("cpu")
    memory.cap(device, worker.task.options.device_memory_gib, every_visible=True)  # DataParallel drives every visible GPU
    return device
