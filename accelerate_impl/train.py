"""accelerate: the PyTorch loop as Hugging Face Accelerate users write it.

Read top to bottom as accelerate's `examples/nlp_example.py`: `Accelerator()`, `accelerator.prepare(...)`
of the model, optimizer and data loaders, `accelerator.backward(loss)` in the step, and
`accelerator.gather_for_metrics(...)` for exact evaluation. The model, the data and the clock are
those every PyTorch variant uses. `accelerate launch` starts the processes from the config file the
harness wrote into the run directory.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from accelerate import Accelerator, PartialState
from accelerate.utils import DataLoaderConfiguration, DistributedType
from torch.utils.data import DataLoader

from accelerate_impl.launch import ACCELERATE_MIXED_PRECISION
from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl.zero_state import ZeroState
from torch_impl import data, memory, mlflow_model, own_time
from torch_impl import train as loop
from torch_impl.model import build_model
from torch_impl.profile import TorchProfiler, region
from torch_impl.recipe import make_optimizer, make_scheduler
from torch_impl.train import AMP_DTYPES, RunningLoss, cast_inputs, device_info, fast_path, set_threads


def train(spec_path: str) -> dict:
    """One rank. Under `accelerate launch` the launcher set the environment from the config file;
    under an engine (`bench.engines.run`) the process group exists and this sets what the launcher would."""
    worker = Worker(spec_path)
    if not os.environ.get("ACCELERATE_MIXED_PRECISION"):  # not launched by `accelerate launch`
        os.environ["ACCELERATE_MIXED_PRECISION"] = ACCELERATE_MIXED_PRECISION[worker.task["precision"]]
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
                                                                            data_seed=task["seed"]),
                                  dynamo_backend="inductor" if task["compile"] else "no",
                                  # One scheduler step per optimizer step: by default Accelerate steps it once
                                  # per process (for schedules written in one-process steps); ours is in the
                                  # run's own steps, as in every other variant.
                                  step_scheduler_with_optimizer=False)
        expected = ACCELERATE_MIXED_PRECISION[task["precision"]]
        if accelerator.mixed_precision != expected:
            raise RuntimeError(f"accelerate launched with mixed_precision={accelerator.mixed_precision}, "
                               f"the task asks for {expected}")
        worker.joined(accelerator.num_processes, distributed_type=str(accelerator.distributed_type),
                      backend=accelerator.state.backend, **device_info(accelerator.device))
        device, per_process_batch = accelerator.device, task["global_batch"] // accelerator.num_processes
        plugin = task.get("accelerate_plugin")
        handed_to = PLUGIN_DISTRIBUTED_TYPE.get(plugin)
        if handed_to and accelerator.distributed_type != handed_to:  # e.g. a CPU launch runs a plugin as DDP
            raise RuntimeError(f"accelerate launched {accelerator.distributed_type}, the run asks for {handed_to}")
        # FSDP2 refuses channels_last parameters and ZeRO flattens them: contiguous under a plugin.
        settings = {**fast_path(device, task), **({"channels_last": False} if plugin else {})}

        model = build_model(task)
        if not plugin:
            model = model.to(memory_format=data.memory_format(device))
        if plugin == "deepspeed" and task["precision"] != "fp32":  # the model in bf16/fp16, inputs as they come
            cast_inputs(model, AMP_DTYPES[task["precision"]])
        optimizer = make_optimizer(model, task)
        torch_optimizer = optimizer
        if worker.synthetic:  # one batch made on the device: no input pipeline, no evaluation
            model, optimizer = accelerator.prepare(model, optimizer)
            train_loader = data.synthetic_batches(task, per_process_batch, device, worker.timed_steps,
                                                  accelerator.process_index)
            eval_loader, epochs = None, 1
        else:
            train_set, test_set = data.load_splits(worker.spec)
            loading = data.loader_options(train_set, worker.loader_workers, settings["pin_memory"])
            train_loader = DataLoader(train_set, batch_size=per_process_batch, shuffle=True, drop_last=True, **loading)
            eval_loader = DataLoader(test_set, batch_size=data.EVAL_BATCH, **loading)
            model, optimizer, train_loader, eval_loader = accelerator.prepare(
                model, optimizer, train_loader, eval_loader)
            epochs = task["epochs"]
        scheduler = accelerator.prepare(make_scheduler(optimizer, task, len(train_loader), epochs))
        # keep_torch_compile=False: unwrapping must not rewire the compiled model (its no_sync would be lost).
        raw_model = accelerator.unwrap_model(model, keep_torch_compile=False)

        def sync() -> None:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            accelerator.wait_for_everyone()

        checkpoint = AccelerateCheckpoint(accelerator)
        first_epoch = worker.restore(checkpoint)  # 0, or the epoch after a resumed run's last checkpoint
        profiler = TorchProfiler(worker, device) if worker.profile_windows else None
        # A rank's own time is its forward, except where the forward all-gathers the parameters.
        gathers_in_forward = plugin == "fsdp" or (plugin == "deepspeed" and task.get("zero_stage") == 3)
        clock = worker.clock(task["global_batch"], sync, steps=(epochs - first_epoch) * len(train_loader),
                             on_warmup_done=lambda: memory.reset_peak(device), profiler=profiler,
                             own_timer=None if gathers_in_forward else own_time.keep(device))
        running_loss = RunningLoss(device)
        evaluate_exactly = None if eval_loader is None else (
            lambda: evaluate(accelerator, raw_model, eval_loader, running_loss))
        # Independent runs are the no-communication bound: no gradient all-reduce.
        no_sync = (lambda: accelerator.no_sync(model)) if worker.independent else contextlib.nullcontext

        def step(images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
            with region("input"):
                x, y = data.to_model_input(images, device), labels.to(device, non_blocking=True)
            with region("optimizer"):
                optimizer.zero_grad(set_to_none=True)
            with no_sync():
                with region("forward"), accelerator.autocast():
                    loss = F.cross_entropy(model(x).float(), y)
                with region("backward"):
                    accelerator.backward(loss)
                with region("optimizer"):
                    optimizer.step()
            return loss

        model.train()
        clock.start()
        # The epoch's data order: a resumed run reads on where it was.
        evaluation, epochs_run = loop.run_epochs(worker, clock, train_loader, step, scheduler, running_loss,
                                                 range(first_epoch, epochs), evaluate_exactly, checkpoint,
                                                 None if eval_loader is None else train_loader.set_epoch)
        if worker.logs_model:  # --mlflow: rank 0 saves the trained model; no rank leaves before it is written
            # FSDP's shards through Accelerate's own full state dict; ZeRO-3's partitions gathered for the read.
            state = (accelerator.get_state_dict(model) if plugin == "fsdp" else mlflow_model.full_state(raw_model))
            mlflow_model.save(worker, state if accelerator.is_main_process else None)
            accelerator.wait_for_everyone()
        return loop.finish(worker, clock, evaluation, epochs_run, device, raw_model, accelerator.is_main_process,
                           settings, model_state_bytes(model, optimizer, torch_optimizer, task), profiler)


# What Accelerate reports when its config file handed the loop to a plugin.
PLUGIN_DISTRIBUTED_TYPE = {"fsdp": DistributedType.FSDP, "deepspeed": DistributedType.DEEPSPEED}


def model_state_bytes(model, optimizer, torch_optimizer: torch.optim.Optimizer, task: dict) -> dict:
    """Under the DeepSpeed plugin ZeRO's own buffers (accelerator.backward also steps, so the gradients'
    moment is not reachable: None), else the prepared model's (FSDP2's DTensor shards included)."""
    if task.get("accelerate_plugin") == "deepspeed":
        state = ZeroState(model.module, model.optimizer, torch_optimizer, task["zero_stage"])
        return state.bytes()
    return memory.model_state_bytes(model, optimizer.optimizer)


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


@torch.no_grad()
def evaluate(accelerator: Accelerator, raw_model: torch.nn.Module, eval_loader: DataLoader,
             running_loss: RunningLoss) -> dict:
    """gather_for_metrics drops the samples Accelerate repeats to even out the last batches."""
    raw_model.eval()
    correct, losses = [], []
    for images, labels in eval_loader:
        with accelerator.autocast():
            logits = raw_model(data.to_model_input(images, accelerator.device))
        hits, loss = accelerator.gather_for_metrics(
            ((logits.argmax(1) == labels).double(), F.cross_entropy(logits.float(), labels, reduction="none").double()))
        correct.append(hits)
        losses.append(loss)
    raw_model.train()
    loss_sum, batches = running_loss.take()
    train = torch.stack([loss_sum.double(), torch.tensor(float(batches), dtype=torch.float64, device=accelerator.device)])
    train = accelerator.reduce(train, reduction="sum")
    hits, loss = torch.cat(correct), torch.cat(losses)
    return {"test_accuracy": hits.mean().item(), "test_loss": loss.mean().item(), "eval_samples": len(hits),
            "train_loss": (train[0] / train[1].clamp(min=1)).item()}


def main() -> None:
    train(spec_path_from_argv())
    PartialState().destroy_process_group()
    exit_now(0)  # the same gloo abort at exit as torch-ddp


if __name__ == "__main__":
    main()
