"""torch-dp takes no option of its own; what it refuses (bench.spec.options). Standard library only."""
from __future__ import annotations

from bench.spec.task import SpecError

OPTIONS = ()


def modes(given: dict[str, list], sweep: bool) -> list[dict]:
    return [{}]


def check(spec) -> None:
    if spec.task.options.compile and spec.device_type == "cuda" and spec.world_size > 1:
        raise SpecError("--compile does not speed up nn.DataParallel over several GPUs (it runs eager; "
                        "pytorch/pytorch#94636): use torch-ddp --compile, or torch-dp on one GPU")
