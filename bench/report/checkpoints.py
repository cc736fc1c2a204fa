"""Checkpoints: per configuration that saved them, the training stall of one save, loading it back, the bytes on
disk, and the stall against an epoch's training time."""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt
from bench.metrics.blocks import Block, table_section
from bench.status import Status


def table(runs: pd.DataFrame) -> pd.DataFrame | None:
    """Per configuration that saved checkpoints: the training stall of one save, loading it back, the bytes
    on disk (medians over its runs), and the stall against an epoch's training time."""
    if "checkpoint_save_s" not in runs:
        return None
    saved = runs[(runs["status"] == Status.OK) & runs["checkpoint_save_s"].notna()].copy()
    if saved.empty:
        return None
    saved["series"] = [key.series for key in saved["key"]]
    saved["stall"] = saved["checkpoint_save_s"] / (saved["train_s"] / saved["epochs"])
    folded = saved.groupby(["series", "world_size"], sort=False).agg(
        runs=("run_id", "size"), save=("checkpoint_save_s", "median"), load=("checkpoint_load_s", "median"),
        size=("checkpoint_bytes", "median"), stall=("stall", "median"),
        resumed=("resumed_from", lambda r: int(r.notna().sum()))).reset_index()
    body = [[r.series, str(r.world_size), str(r.runs), fmt(r.save, ".3f"), fmt(r.load, ".3f"),
             fmt(r.size / 2**20, ".2f"), fmt(r.stall, ".2%"), str(r.resumed)] for r in folded.itertuples()]
    headers = ["variant", "devices", "runs", "save s (stall)", "load s", "MiB on disk", "save / epoch of training",
               "resumed runs"]
    return pd.DataFrame(body, columns=headers)


def section(runs: pd.DataFrame) -> list[Block]:
    return table_section("Checkpoints", 2, (
        "Saved after every epoch the approach's own way (DDP: rank 0 `torch.save` of the unwrapped state "
        "dicts; Accelerate: `save_state`; TensorFlow: `tf.train.Checkpoint` + `CheckpointManager`), every "
        "rank waiting until it is written: the save is the training stall. Load = reading the last one "
        "back before the final evaluation."), table(runs))
