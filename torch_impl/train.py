"""The training loop every PyTorch variant shares.

A variant hands the Trainer its wrapped model, the collectives it needs (a
device-sync-and-barrier for the clock, a sum-all-reduce for evaluation) and
which shard of the data this process reads; the Trainer does the rest the same
way for all of them.
"""
from __future__ import annotations

import contextlib
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from bench.worker import Worker, cpu_model, peak_rss_mb
from torch_impl import data
from torch_impl.model import count_parameters

AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


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


def make_optimizer(model: nn.Module, task: dict) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=task["lr"], momentum=task["momentum"],
                           weight_decay=task["weight_decay"])


class Trainer:
    def __init__(self, worker: Worker, model: nn.Module, module: nn.Module, device: torch.device,
                 sync: Callable[[], None], all_reduce_sum: Callable[[torch.Tensor], None] = lambda t: None,
                 shard_rank: int = 0, shard_count: int = 1, optimizer: torch.optim.Optimizer | None = None):
        self.worker, self.task = worker, worker.task
        self.model, self.module, self.device = model, module, device
        self.sync, self.all_reduce_sum = sync, all_reduce_sum
        self.shard_rank, self.shard_count = shard_rank, shard_count
        self.batch = self.task["global_batch"] // shard_count  # what this process loads per step
        self.optimizer = optimizer or make_optimizer(model, self.task)
        precision = self.task["precision"]
        self.amp_dtype = AMP_DTYPES.get(precision)
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self._loss_sum = torch.zeros((), device=device)
        self._batches = 0

    # ------------------------------------------------------------ one step
    def run_batch(self, images: torch.Tensor, labels: torch.Tensor) -> None:
        """One training step, the per-step function the pytest-benchmark benchmarks time."""
        x = data.to_model_input(images, self.device)
        y = labels.to(self.device, non_blocking=True)
        self.optimizer.zero_grad(set_to_none=True)
        with self.no_sync():
            with self.autocast():
                loss = F.cross_entropy(self.model(x), y)
            self.backward_and_step(loss)
        self._loss_sum += loss.detach().float()  # stays on the device: no sync inside a window
        self._batches += 1

    def no_sync(self):
        """Independent mode switches gradient synchronisation off here (see the variants); else a no-op."""
        return contextlib.nullcontext()

    def autocast(self):
        return torch.autocast(self.device.type, dtype=self.amp_dtype, enabled=self.amp_dtype is not None)

    def backward_and_step(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def take_train_loss(self) -> tuple[torch.Tensor, int]:
        """The summed training loss and batch count since the last call (reset)."""
        loss_sum, batches = self._loss_sum.clone(), self._batches
        self._loss_sum.zero_()
        self._batches = 0
        return loss_sum, batches

    # ------------------------------------------------------------ input
    def epochs(self) -> tuple[list, Callable[[int], None], data.InMemoryImages | None]:
        """Per epoch an iterable of (images, labels); a set_epoch hook; the test set (None: no eval)."""
        task = self.task
        if task["dataset"] == "synthetic":
            steps = self.worker.timed_steps
            return [data.synthetic_batches(task, self.batch, self.device, steps, self.shard_rank)], lambda e: None, None
        train_set, test_set = data.load_splits(self.worker.spec)
        loader = data.train_loader(train_set, self.batch, self.shard_rank, self.shard_count, task["seed"])
        return [loader] * task["epochs"], loader.sampler.set_epoch, test_set

    # ------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self, test_set: data.InMemoryImages) -> dict:
        """Exact accuracy: every test sample once across ranks, summed to every rank."""
        self.module.eval()
        totals = torch.zeros(5, dtype=torch.float64, device=self.device)
        for images, labels in data.eval_loader(test_set, self.shard_rank, self.shard_count):
            x = data.to_model_input(images, self.device)
            y = labels.to(self.device)
            with self.autocast():
                logits = self.module(x)
            totals[0] += (logits.argmax(1) == y).sum()
            totals[1] += len(y)
            totals[2] += F.cross_entropy(logits.float(), y, reduction="sum")
        totals[3], totals[4] = self.take_train_loss()
        self.all_reduce_sum(totals)
        self.module.train()
        correct, count, loss_sum, train_loss_sum, batches = totals.tolist()
        return {"test_accuracy": correct / count, "test_loss": loss_sum / count, "eval_samples": int(count),
                "train_loss": train_loss_sum / max(batches, 1)}

    # ------------------------------------------------------------ the run
    def fit(self) -> dict:
        epochs, set_epoch, test_set = self.epochs()
        clock = self.worker.clock(self.task["global_batch"], self.sync)

        def run_epoch(epoch: int) -> None:
            set_epoch(epoch)
            for images, labels in epochs[epoch]:
                self.run_batch(images, labels)
                clock.step_done()
                if self.worker.independent and clock.done:
                    return

        self.model.train()
        return self.worker.train(clock, len(epochs), len(epochs[0]), run_epoch,
                                 (lambda: self.evaluate(test_set)) if test_set is not None else None,
                                 self._peak_memory_mb, count_parameters(self.module))

    def _peak_memory_mb(self) -> float:
        if self.device.type == "cuda":
            return max(torch.cuda.max_memory_allocated(d) for d in range(torch.cuda.device_count())) / 2**20
        return peak_rss_mb()
