"""deepspeed's option: the ZeRO stage (also what accelerate's DeepSpeed plugin runs). Standard library only."""
from __future__ import annotations

from dataclasses import dataclass, field

from bench.spec.options import Option
from bench.spec.setting import setting
from bench.spec.task import SpecError

STAGES = (1, 2, 3)
RUN_DEFAULT = 2  # bench run: DeepSpeed's most used stage; a sweep runs each stage


def parse_stage(text: str) -> int:
    try:
        stage = int(text)
    except ValueError:
        raise SpecError(f"--zero-stage {text!r}: give stages, e.g. 3 or 1,2,3") from None
    if stage not in STAGES:
        raise SpecError(f"--zero-stage {stage} is not a ZeRO stage: choose 1, 2 or 3")
    return stage


@dataclass(frozen=True)
class Settings:
    """deepspeed's own command-line setting: the text given (a sweep's several, comma-separated)."""
    zero_stage: str | None = field(default=None, metadata=setting(
        f"deepspeed (and accelerate --accelerate-plugin deepspeed): the ZeRO stage, 1 (optimizer state sharded), 2 "
        f"(+ gradients) or 3 (+ parameters); run default {RUN_DEFAULT}, a sweep runs each of 1,2,3 unless told"))


ZERO_STAGE = Option(Settings, "zero_stage", parse=parse_stage, label="ZeRO-{}")
OPTIONS = (ZERO_STAGE,)


def stages(given: dict[str, list], sweep: bool) -> list[int]:
    return given.get("zero_stage") or (list(STAGES) if sweep else [RUN_DEFAULT])


def modes(given: dict[str, list], sweep: bool) -> list[dict]:
    return [{"zero_stage": stage} for stage in stages(given, sweep)]


def check(spec) -> None:
    if spec.task.options.zero_stage is None:
        raise SpecError(f"{spec.variant.name} needs --zero-stage 1, 2 or 3")
    parse_stage(str(spec.task.options.zero_stage))
