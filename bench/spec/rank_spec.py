"""What every process of a run reads: `spec.json` in the run folder, written by the harness
(bench.run.execute.write_spec) and loaded back by each rank (bench.worker.Worker) into these same dataclasses.

Standard library and `bench.spec.task` only, so that a rank imports nothing of the harness: a field renamed
here fails where it is read, at attribute access, and every field a rank may read is listed below.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from bench.spec.task import TaskSpec


@dataclass(frozen=True)
class NodePlan:
    """One node's share of the run: which GPUs it sees, and the cores of each of its slots."""
    node_rank: int
    cuda_visible: list[str] | None  # the GPU ids it sees; None on a CPU
    cpu_slots: list[list[int]]


@dataclass(frozen=True)
class RankSpec:
    run_id: str
    variant: str
    task: TaskSpec
    device_type: str                   # cpu | cuda
    nodes: int
    devices_per_node: int
    world_size: int
    run_dir: str
    # The settings the variants table gives this approach's module (Variant.approach), as its keyword arguments.
    approach: dict = field(default_factory=dict)
    data_path: str | None = None       # the cached dataset's arrays (bench.worker.data), for the in-memory input
    images: str | None = None          # --input files | s3: the image folder or s3://bucket/prefix (never credentials)
    oversubscribed: bool = False
    independent: bool = False          # gradient synchronisation off: the no-communication bound
    engine: str = "torchrun"
    profile: bool = False
    log_model: bool = False            # --mlflow: rank 0 saves the trained model for the harness to log
    resume_from: str | None = None     # the checkpoint folder of the run this one continues
    node_plans: tuple[NodePlan, ...] = ()

    def plan_of(self, node_rank: int) -> NodePlan:
        """This node's plan (a real multi-host run's spec holds only this host's node)."""
        [plan] = [p for p in self.node_plans if p.node_rank == node_rank]
        return plan

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1)

    @classmethod
    def from_dict(cls, doc: dict) -> "RankSpec":
        return cls(**{**doc, "task": TaskSpec.from_dict(doc["task"]),
                      "node_plans": tuple(NodePlan(**p) for p in doc.get("node_plans", ()))})

    @classmethod
    def load(cls, path: str | Path) -> "RankSpec":
        return cls.from_dict(json.loads(Path(path).read_text()))
