"""accelerate: the shared PyTorch loop with what Hugging Face Accelerate adds.

The model, data and loop are torch_impl's; this file shows the Accelerate lines:
`Accelerator()`, `accelerator.prepare(...)`, `accelerator.backward(loss)` and
`accelerator.gather_for_metrics(...)` for exact evaluation. `accelerate launch`
starts the processes from the config file the harness wrote into the run directory.
"""
from __future__ import annotations

import os

import torch
import torch.nn.functional as F
from accelerate import Accelerator, PartialState
from accelerate.utils import DataLoaderConfiguration
from torch.utils.data import DataLoader

from bench.task import ACCELERATE_MIXED_PRECISION
from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl import data
from torch_impl.model import build_model
from torch_impl.train import Trainer, device_info, make_optimizer, set_threads


class AccelerateTrainer(Trainer):
    def __init__(self, worker: Worker, accelerator: Accelerator, model, optimizer, train_loader, eval_loader):
        def sync() -> None:
            if accelerator.device.type == "cuda":
                torch.cuda.synchronize(accelerator.device)
            accelerator.wait_for_everyone()

        super().__init__(worker, model, accelerator.unwrap_model(model), accelerator.device, sync,
                         shard_rank=accelerator.process_index, shard_count=accelerator.num_processes,
                         optimizer=optimizer)
        self.accelerator, self.train_loader, self.eval_loader = accelerator, train_loader, eval_loader

    def no_sync(self):
        return self.accelerator.no_sync(self.model) if self.worker.independent else super().no_sync()

    def autocast(self):
        return self.accelerator.autocast()

    def backward_and_step(self, loss: torch.Tensor) -> None:
        self.accelerator.backward(loss)
        self.optimizer.step()

    def epochs(self):
        if self.train_loader is None:  # synthetic data: the shared on-device batches, no evaluation
            return super().epochs()
        return [self.train_loader] * self.task["epochs"], self.train_loader.set_epoch, self.eval_loader

    @torch.no_grad()
    def evaluate(self, eval_loader) -> dict:
        """gather_for_metrics drops the samples Accelerate repeats to even out the last batches."""
        self.module.eval()
        correct, losses = [], []
        for images, labels in eval_loader:
            with self.autocast():
                logits = self.module(data.to_model_input(images, self.device))
            hits, loss = self.accelerator.gather_for_metrics(
                ((logits.argmax(1) == labels).double(), F.cross_entropy(logits.float(), labels, reduction="none").double()))
            correct.append(hits)
            losses.append(loss)
        self.module.train()
        loss_sum, batches = self.take_train_loss()
        train = torch.stack([loss_sum.double(), torch.tensor(float(batches), dtype=torch.float64, device=self.device)])
        train = self.accelerator.reduce(train, reduction="sum")
        hits, loss = torch.cat(correct), torch.cat(losses)
        return {"test_accuracy": hits.mean().item(), "test_loss": loss.mean().item(), "eval_samples": len(hits),
                "train_loss": (train[0] / train[1].clamp(min=1)).item()}


def train(spec_path: str) -> dict:
    """One rank. Under `accelerate launch` the launcher set the environment from the config file;
    under an engine (`bench.distributed.run`) the process group exists and this sets what the launcher would."""
    worker = Worker(spec_path)
    if not os.environ.get("ACCELERATE_MIXED_PRECISION"):  # not launched by `accelerate launch`
        os.environ["ACCELERATE_MIXED_PRECISION"] = ACCELERATE_MIXED_PRECISION[worker.task["precision"]]
        if worker.device_type == "cpu":
            os.environ["ACCELERATE_USE_CPU"] = "true"
    with worker.session():
        set_threads(worker.pin())
        task = worker.task
        # The data order: one seeded random order, its batches dealt out to the processes.
        accelerator = Accelerator(dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True,
                                                                            data_seed=task["seed"]))
        expected = ACCELERATE_MIXED_PRECISION[task["precision"]]
        if accelerator.mixed_precision != expected:
            raise RuntimeError(f"accelerate launched with mixed_precision={accelerator.mixed_precision}, "
                               f"the task asks for {expected}")
        worker.joined(accelerator.num_processes, distributed_type=str(accelerator.distributed_type),
                      backend=accelerator.state.backend, **device_info(accelerator.device))

        model = build_model(task)
        optimizer = make_optimizer(model, task)
        if task["dataset"] == "synthetic":
            model, optimizer = accelerator.prepare(model, optimizer)
            train_loader = eval_loader = None
        else:
            train_set, test_set = data.load_splits(worker.spec)
            per_process_batch = task["global_batch"] // accelerator.num_processes
            train_loader = DataLoader(train_set, batch_size=per_process_batch, shuffle=True, drop_last=True,
                                      collate_fn=data.whole_batch)
            eval_loader = DataLoader(test_set, batch_size=data.EVAL_BATCH, collate_fn=data.whole_batch)
            model, optimizer, train_loader, eval_loader = accelerator.prepare(
                model, optimizer, train_loader, eval_loader)

        result = AccelerateTrainer(worker, accelerator, model, optimizer, train_loader, eval_loader).fit()
    return result


def main() -> None:
    train(spec_path_from_argv())
    PartialState().destroy_process_group()
    exit_now(0)  # the same gloo abort at exit as torch-ddp


if __name__ == "__main__":
    main()
