"""The training loop of the PyTorch variants, top to bottom.

A variant builds its model the way its approach does (DDP, DataParallel, no wrapper), then calls
`train` with the wrapped model, the module inside it (`raw_model`, for evaluation and the parameter
count) and the collectives it needs: a device-sync-and-barrier for the clock's window boundaries and
a sum-all-reduce for exact evaluation. The epoch loop, the batch loop and the clock calls are here.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader

from bench.worker import Worker, cpu_model, peak_rss_mb
from torch_impl import data, memory
from torch_impl.checkpoint import TorchCheckpoint
from torch_impl.flops import flops_per_sample
from torch_impl.model import count_parameters
from torch_impl.recipe import make_optimizer, make_scheduler

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def train(worker: Worker, model: nn.Module, raw_model: nn.Module, device: torch.device, sync: Callable[[], None],
          all_reduce_sum: Callable[[torch.Tensor], None] = lambda totals: None, rank: int = 0, world_size: int = 1,
          no_sync: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
          precision_in_model: bool = False, lockstep_eval: bool = False, fast_path_changes: dict | None = None,
          optimizer: torch.optim.Optimizer | None = None, step: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
          model_state: Callable[[], dict[str, int]] | None = None) -> dict:
    """Train the task; `rank` / `world_size` say which shard of every batch and of the test set this
    process reads; `no_sync` switches gradient synchronisation off (independent runs). A sharded model
    (FSDP) casts to its own precision (`precision_in_model`: no autocast) and gathers its parameters in
    every forward, so every rank evaluates as many batches (`lockstep_eval`). An approach with a step of its
    own (DeepSpeed's engine, Fabric) passes the `optimizer` its wrapper holds (the schedule steps it), its
    `step(images, labels) -> loss`, and how it counts its `model_state` bytes."""
    task = worker.task
    batch = task["global_batch"] // world_size  # what this process loads per step
    settings = {**fast_path(device, task), **(fast_path_changes or {})}
    optimizer = make_optimizer(model, task) if optimizer is None else optimizer
    amp_dtype = None if precision_in_model else AMP_DTYPES.get(task["precision"])
    scaler = torch.amp.GradScaler(device.type, enabled=task["precision"] == "fp16")
    if task["compile"]:  # the wrapped model, as torch.compile's docs for DDP say; compiled at step 1
        model = torch.compile(model)
    if step is None:
        step = functools.partial(train_step, model, optimizer, scaler, amp_dtype, device=device, no_sync=no_sync)
    if model_state is None:
        model_state = functools.partial(memory.model_state_bytes, model, optimizer)
    if worker.synthetic:  # one batch made on the device: no input pipeline, no evaluation
        loader, test_set, epochs = data.synthetic_batches(task, batch, device, worker.timed_steps, rank), None, 1
    else:
        train_set, test_set = data.load_splits(worker.spec)
        loader = data.train_loader(train_set, batch, rank, world_size, task["seed"], settings["pin_memory"],
                                   worker.loader_workers)
        epochs = task["epochs"]
    scheduler = make_scheduler(optimizer, task, len(loader), epochs)
    checkpoint = TorchCheckpoint(raw_model, optimizer, scaler, device, rank, sync, scheduler)
    first_epoch = worker.restore(checkpoint)  # 0, or the epoch after a resumed run's last checkpoint
    clock = worker.clock(task["global_batch"], sync, steps=(epochs - first_epoch) * len(loader),
                         on_warmup_done=lambda: memory.reset_peak(device))
    running_loss = RunningLoss(device)
    loss_curve = worker.loss_curve(first_epoch * len(loader))
    # One evaluation loader for the run: a file input's workers stay up from one evaluation to the next.
    test_loader = None if test_set is None else data.eval_loader(test_set, rank, world_size, device.type == "cuda",
                                                                 worker.loader_workers)
    evaluate_exactly = None if test_set is None else (
        lambda: evaluate(raw_model, test_loader, device, amp_dtype, all_reduce_sum, running_loss, lockstep_eval))

    model.train()
    clock.start()
    for epoch in range(first_epoch, epochs):
        if test_set is not None:
            loader.sampler.set_epoch(epoch)  # the data order is the epoch's: a resumed run reads on where it was
        for images, labels in clock.timed(loader):
            loss = step(images, labels)
            scheduler.step()
            running_loss.add(loss)
            loss_curve.add(loss.detach(), clock)
        # The clock pauses meanwhile: the checkpoint (if the task asks) and the exact evaluation.
        evaluation = worker.end_epoch(clock, epoch, epochs, evaluate_exactly, checkpoint)
        if clock.stop:
            break
    return worker.finish(clock, evaluation, epoch + 1, peak_memory_mb(device), count_parameters(raw_model),
                         flops_per_sample(task) if rank == 0 else None, settings,
                         memory={"model_state_bytes": model_state(),
                                 **memory.device_peaks(device)})


def fast_path(device: torch.device, task: dict) -> dict:
    """PyTorch's performance-guide settings for this device, switched on, and what the row records."""
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True         # the fastest conv algorithms for these fixed shapes
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 matmuls and convolutions on TF32 tensor cores
        torch.backends.cudnn.allow_tf32 = True
    return {"channels_last": data.CHANNELS_LAST[device.type], "cudnn_benchmark": cuda, "tf32": cuda,
            "pin_memory": cuda, "compile": bool(task["compile"]),
            "persistent_workers": bool(task.get("loader_workers"))}


def cast_inputs(model: nn.Module, dtype: torch.dtype) -> None:
    """A model held in bf16/fp16 (DeepSpeed's precision modes) casts its inputs as they enter."""
    model.register_forward_pre_hook(lambda module, args: tuple(a.to(dtype) for a in args))


def place(model: nn.Module, device: torch.device) -> nn.Module:
    """The model on its device, in the device's memory format (channels_last where that is the fast path)."""
    return model.to(device, memory_format=data.memory_format(device))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               amp_dtype: torch.dtype | None, images: torch.Tensor, labels: torch.Tensor, device: torch.device,
               no_sync: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> torch.Tensor:
    """One step (the function pytest-benchmark times): uint8 batch in, loss out, weights updated."""
    x = data.to_model_input(images, device)
    y = labels.to(device, non_blocking=True)
    optimizer.zero_grad(set_to_none=True)
    with no_sync():
        with autocast(device, amp_dtype):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
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


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return max(torch.cuda.max_memory_allocated(d) for d in range(torch.cuda.device_count())) / 2**20
    return peak_rss_mb()


def device_info(device: torch.device) -> dict:
    """What the row records about the framework and the device this process trains on."""
    info = {"framework_version": torch.__version__, "device": str(device), "threads": torch.get_num_threads()}
    if device.type == "cuda":
        info.update(device_name=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.distributed.is_nccl_available() else None)
    else:
        info.update(device_name=cpu_model())
    return info


def join_process_group(worker: Worker) -> tuple[int, int, torch.device, Callable[[], None]]:
    """A torchrun rank's process group (env://; an engine's already exists), its device, and the clock's
    window-boundary sync: (rank, world size, device, sync)."""
    cuda = worker.device_type == "cuda"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", worker.cuda_device(torch.cuda.device_count())) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    worker.joined(dist.get_world_size(), backend=dist.get_backend(), **device_info(device))

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier()

    return dist.get_rank(), dist.get_world_size(), device, sync


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
    return torch.device("cuda", 0) if worker.device_type == "cuda" else torch.device("cpu")
