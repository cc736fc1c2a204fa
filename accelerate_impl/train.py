"""accelerate: the PyTorch loop as Hugging Face Accelerate users write it.

Read top to bottom as accelerate's `examples/nlp_example.py`: `Accelerator()`, `accelerator.prepare(...)`
of the model, optimizer and data loaders, `accelerator.backward(loss)` in the step, and
`accelerator.gather_for_metrics(...)` for exact evaluation. These are `AcceleratedRank`, the approach it
hands the shared PyTorch loop (torch_impl/train.py: the epochs, the schedule, the clock, checkpoints and the
record), as DeepSpeed and Lightning do. The model and the data are those every PyTorch variant uses.
`accelerate launch` starts the processes from the config file the harness wrote into the run directory.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator, PartialState
from accelerate.utils import (DataLoaderConfiguration, DDPCommunicationHookType, DistributedDataParallelKwargs,
                               DistributedType)
from torch.utils.data import DataLoader

from accelerate_impl.knobs import DDP as KNOBS
from accelerate_impl.launch import ACCELERATE_MIXED_PRECISION
from bench.spec import knobs
from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl import data, memory, mlflow_model
from torch_impl import train as loop
from torch_impl.zero_state import ZeroState
from torch_impl.model import build_model
from torch_impl.profile import region
from bench.worker.kernels import as_shipped
from torch_impl.fast_path import switch_on
from torch_impl.recipe import make_optimizer
from torch_impl.train import AMP_DTYPES, RunningLoss, cast_inputs, device_info, fast_path, set_threads


def ddp_kwargs(settings: dict) -> DistributedDataParallelKwargs:
    """What `prepare` hands DDP: the run's knobs (accelerate_impl/knobs.py), each Accelerate's default unless --set."""
    return DistributedDataParallelKwargs(bucket_cap_mb=settings["bucket_cap_mb"],
                                         gradient_as_bucket_view=settings["gradient_as_bucket_view"],
                                         static_graph=settings["static_graph"],
                                         comm_hook=DDPCommunicationHookType(settings["comm_hook"]))


def train(spec_path: str) -> dict:
    """One rank. Under `accelerate launch` the launcher set the environment from the config file;
    under an engine (`bench.engines.run`) the process group exists and this sets what the launcher would."""
    worker = Worker(spec_path)
    if not os.environ.get("ACCELERATE_MIXED_PRECISION"):  # not launched by `accelerate launch`
        os.environ["ACCELERATE_MIXED_PRECISION"] = ACCELERATE_MIXED_PRECISION[worker.task.recipe.precision]
        if worker.device_type == "cpu":
            os.environ["ACCELERATE_USE_CPU"] = "true"
        else:  # the GPU the engine's rank chose (Accelerate would take LOCAL_RANK modulo the visible count)
            os.environ["ACCELERATE_TORCH_DEVICE"] = f"cuda:{worker.cuda_device(torch.cuda.device_count())}"
    with worker.session():
        set_threads(worker.pin())
        task = worker.task
        # The data order: one seeded random order, its batches dealt out to the processes. --compile:
        # Accelerate's own torch.compile (its dynamo plugin), applied by prepare().
        accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True,
                                                                            data_seed=task.recipe.seed),
                                  dynamo_backend="inductor" if task.options.compile else "no",
                                  # One scheduler step per optimizer step: by default Accelerate steps it once
                                  # per process (for schedules written in one-process steps); ours is in the
                                  # run's own steps, as in every other variant.
                                  step_scheduler_with_optimizer=False,
                                  kwargs_handlers=[ddp_kwargs(knobs.values(KNOBS, task.options.knobs))])
        expected = ACCELERATE_MIXED_PRECISION[task.recipe.precision]
        if accelerator.mixed_precision != expected:
            raise RuntimeError(f"accelerate launched with mixed_precision={accelerator.mixed_precision}, "
                               f"the task asks for {expected}")
        worker.joined(accelerator.num_processes, distributed_type=str(accelerator.distributed_type),
                      backend=accelerator.state.backend, **device_info(accelerator.device))
        device, per_process_batch = accelerator.device, task.recipe.global_batch // accelerator.num_processes
        memory.cap(device, task.options.device_memory_gib)
        plugin = task.options.accelerate_plugin
        handed_to = PLUGIN_DISTRIBUTED_TYPE.get(plugin)
        if handed_to and accelerator.distributed_type != handed_to:  # e.g. a CPU launch runs a plugin as DDP
            raise RuntimeError(f"accelerate launched {accelerator.distributed_type}, the run asks for {handed_to}")

        model = build_model(task)
        if not plugin:
            model = model.to(memory_format=data.memory_format(device))
        if plugin == "deepspeed" and task.recipe.precision != "fp32":  # the model in bf16/fp16, inputs as they come
            cast_inputs(model, AMP_DTYPES[task.recipe.precision])
        # The fused step under Accelerate's DDP; its FSDP and DeepSpeed plugins hold the parameters their own way.
        optimizer = make_optimizer(model, task, fused=not plugin and switch_on("fused_optimizer", device.type, as_shipped()))
        torch_optimizer = optimizer
        if worker.synthetic:  # one batch made on the device (the shared loop's): no input pipeline, no evaluation
            model, optimizer = accelerator.prepare(model, optimizer)
            loaders = None
        else:
            train_set, test_set = data.load_splits(worker.spec)
            loading = data.loader_options(train_set, worker.loader_workers, fast_path(device, task)["pin_memory"])
            train_loader = DataLoader(train_set, batch_size=per_process_batch, shuffle=True, drop_last=True, **loading)
            eval_loader = DataLoader(test_set, batch_size=data.EVAL_BATCH, **loading)
            model, optimizer, train_loader, eval_loader = accelerator.prepare(
                model, optimizer, train_loader, eval_loader)
            loaders = train_loader, eval_loader
        return loop.train(worker, AcceleratedRank(accelerator, model, optimizer, torch_optimizer, loaders, worker))


class AcceleratedRank(loop.Approach):
    """The shared loop's steps, Accelerate's way: its prepared loaders, `accelerator.backward`, its autocast,
    `gather_for_metrics` for exact evaluation, `save_state` for checkpoints."""
    compiles_itself = True  # prepare() applied its dynamo plugin
    has_own_step = True

    def __init__(self, accelerator: Accelerator, model, optimizer, torch_optimizer: torch.optim.Optimizer,
                 loaders: tuple[DataLoader, DataLoader] | None, worker: Worker):
        # keep_torch_compile=False: unwrapping must not rewire the compiled model (its no_sync would be lost).
        super().__init__(model, accelerator.unwrap_model(model, keep_torch_compile=False), accelerator.device,
                         accelerator.process_index, accelerator.num_processes, optimizer)
        self.accelerator, self.torch_optimizer, self.loaders, self.task = accelerator, torch_optimizer, loaders, worker.task
        self.plugin = worker.task.options.accelerate_plugin
        # FSDP2 refuses channels_last parameters and ZeRO flattens them: contiguous under a plugin.
        self.channels_last = not self.plugin
        # A rank's own time is its forward, except where the forward all-gathers the parameters.
        zero3 = self.plugin == "deepspeed" and worker.task.options.zero_stage == 3
        self.lockstep_eval = self.plugin == "fsdp" or zero3
        # Independent runs are the no-communication bound: no gradient all-reduce.
        self.no_sync = (lambda: accelerator.no_sync(model)) if worker.independent else contextlib.nullcontext

    def sync_off(self):
        # Accelerate's DDP can train a window unsynchronised; its FSDP and DeepSpeed plugins shard instead.
        return None if self.plugin else self.accelerator.no_sync(self.model)

    def sync(self) -> None:
        super().sync()
        self.accelerator.wait_for_everyone()

    def input(self, worker: Worker, batch: int, pin_memory: bool):
        train_loader, eval_loader = self.loaders
        return train_loader, eval_loader, train_loader.set_epoch  # the epoch's order: a resumed run reads on

    def schedule(self, scheduler):
        return self.accelerator.prepare(scheduler)

    def checkpoint(self, optimizer, scaler, scheduler) -> "AccelerateCheckpoint":
        return AccelerateCheckpoint(self.accelerator)

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        model, optimizer, accelerator = self.model, self.optimizer, self.accelerator
        with region("input"):
            x, y = data.to_model_input(images, self.device), labels.to(self.device, non_blocking=True)
        with region("optimizer"):
            optimizer.zero_grad(set_to_none=True)
        with self.step_sync():
            with region("forward"), accelerator.autocast():
                loss = F.cross_entropy(model(x).float(), y)
            with region("backward"):
                accelerator.backward(loss)
            with region("optimizer"):
                optimizer.step()
        return loss

    @torch.no_grad()
    def evaluate(self, eval_loader: DataLoader, amp_dtype, running_loss: RunningLoss) -> dict:
        """gather_for_metrics drops the samples Accelerate repeats to even out the last batches."""
        accelerator, raw_model = self.accelerator, self.raw_model
        raw_model.eval()
        correct, losses = [], []
        for images, labels in eval_loader:
            with accelerator.autocast():
                logits = raw_model(data.to_model_input(images, accelerator.device))
            hits, loss = accelerator.gather_for_metrics(
                ((logits.argmax(1) == labels).double(),
                 F.cross_entropy(logits.float(), labels, reduction="none").double()))
            correct.append(hits)
            losses.append(loss)
        raw_model.train()
        loss_sum, batches = running_loss.take()
        train = torch.stack([loss_sum.double(),
                             torch.tensor(float(batches), dtype=torch.float64, device=accelerator.device)])
        train = accelerator.reduce(train, reduction="sum")
        hits, loss = torch.cat(correct), torch.cat(losses)
        return {"test_accuracy": hits.mean().item(), "test_loss": loss.mean().item(), "eval_samples": len(hits),
                "train_loss": (train[0] / train[1].clamp(min=1)).item()}

    def full_state_dict(self) -> dict[str, torch.Tensor] | None:
        # FSDP's shards through Accelerate's own full state dict; ZeRO-3's partitions gathered for the read.
        state = (self.accelerator.get_state_dict(self.model) if self.plugin == "fsdp"
                 else mlflow_model.full_state(self.raw_model))
        return state if self.accelerator.is_main_process else None

    def model_state(self, model, optimizer) -> dict[str, int]:
        """Under the DeepSpeed plugin ZeRO's own buffers (accelerator.backward also steps, so the gradients'
        moment is not reachable: None), else the prepared model's (FSDP2's DTensor shards included)."""
        if self.plugin == "deepspeed":
            return ZeroState(model.module, model.optimizer, self.torch_optimizer, self.task.options.zero_stage).bytes()
        return memory.model_state_bytes(model, optimizer.optimizer)


# What Accelerate reports when its config file handed the loop to a plugin.
PLUGIN_DISTRIBUTED_TYPE = {"fsdp": DistributedType.FSDP, "deepspeed": DistributedType.DEEPSPEED}


class AccelerateCheckpoint:
    """Accelerate's own: `save_state` writes the prepared model, optimizer, scaler, samplers and every
    process's RNG; the epoch count is an object registered for checkpointing."""

    def __init__(self, accelerator: Accelerator):
        self.accelerator, self.epochs_done = accelerator, 0
        accelerator.register_for_checkpointing(self)

    def save(self, directory: Path, epochs_done: int) -> None:
        self.epochs_done = epochs_done
        self.accelerator.save_state(str(directory))
        self.accelerator.wait_for_everyone()

    def load(self, directory: Path) -> int:
        self.accelerator.load_state(str(directory))
        return self.epochs_done

    def state_dict(self) -> dict:
        return {"epochs_done": self.epochs_done}

    def load_state_dict(self, state: dict) -> None:
        self.epochs_done = state["epochs_done"]


def main() -> None:
    train(spec_path_from_argv())
    PartialState().destroy_process_group()
    exit_now(0)  # the same gloo abort at exit as torch-ddp


if __name__ == "__main__":
    main()
