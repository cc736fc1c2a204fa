"""Checkpoints as DDP's tutorial writes them: rank 0 `torch.save`s the unwrapped model's and the
optimizer's state dicts (+ the loss scaler and the RNG), written aside and renamed so that a kill never
leaves half a file; every rank waits at a barrier, then may load them onto its own device."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import torch
from torch import nn

FILE = "checkpoint.pt"


class TorchCheckpoint:
    def __init__(self, raw_model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                 device: torch.device, rank: int, barrier: Callable[[], None],
                 scheduler: torch.optim.lr_scheduler.LRScheduler | None = None):
        self.raw_model, self.optimizer, self.scaler, self.scheduler = raw_model, optimizer, scaler, scheduler
        self.device, self.rank, self.barrier = device, rank, barrier

    def save(self, directory: Path, epochs_done: int) -> None:
        if self.rank == 0:
            directory.mkdir(parents=True, exist_ok=True)
            state = {"model": self.raw_model.state_dict(), "optimizer": self.optimizer.state_dict(),
                     "scaler": self.scaler.state_dict(), "rng": torch.get_rng_state(), "epochs_done": epochs_done,
                     "scheduler": self.scheduler.state_dict() if self.scheduler else None}
            aside = directory / f"{FILE}.tmp"
            torch.save(state, aside)
            os.replace(aside, directory / FILE)
        self.barrier()  # no rank trains on while the saved state could still change under rank 0

    def load(self, directory: Path) -> int:
        state = torch.load(directory / FILE, map_location=self.device, weights_only=True)
        self.raw_model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        if self.scheduler is not None and state.get("scheduler") is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["rng"])
        return state["epochs_done"]
