"""accelerate's option: hand its loop to FSDP or DeepSpeed through its config file (with DeepSpeed's
--zero-stage). Standard library only."""
from __future__ import annotations

from dataclasses import dataclass, field

from bench.spec.options import Option
from bench.spec.setting import setting
from bench.spec.task import SpecError
from deepspeed_impl import options as deepspeed_options

PLUGINS = ("fsdp", "deepspeed")


def parse_plugin(text: str) -> str | None:
    if text not in ("none", *PLUGINS):
        raise SpecError(f"unknown --accelerate-plugin {text!r}: choose one of none, {', '.join(PLUGINS)}")
    return None if text == "none" else text


@dataclass(frozen=True)
class Settings:
    """accelerate's own command-line setting: the text given (a sweep's several, comma-separated)."""
    accelerate_plugin: str | None = field(default=None, metadata=setting(
        "accelerate: hand its loop to FSDP (fsdp) or DeepSpeed (deepspeed) through its config file, instead of DDP; "
        "CUDA only (a sweep takes several, e.g. none,fsdp,deepspeed)"))


PLUGIN = Option(Settings, "accelerate_plugin", parse=parse_plugin, label="{} plugin")
OPTIONS = (PLUGIN, deepspeed_options.ZERO_STAGE)


def modes(given: dict[str, list], sweep: bool) -> list[dict]:
    """Once per plugin named (none: its own DDP), the DeepSpeed plugin once per stage. One run without a plugin
    keeps a stage named, for `check` to refuse."""
    plugins = given.get("accelerate_plugin")
    if not plugins:
        stage = None if sweep else (given.get("zero_stage") or [None])[0]
        return [{"accelerate_plugin": None, "zero_stage": stage}]
    if "zero_stage" in given and "deepspeed" not in plugins:
        raise SpecError("--zero-stage goes with deepspeed or accelerate --accelerate-plugin deepspeed")
    return [{"accelerate_plugin": plugin, "zero_stage": stage}
            for plugin in plugins
            for stage in (deepspeed_options.stages(given, sweep) if plugin == "deepspeed" else [None])]


def check(spec) -> None:
    task = spec.task
    if task.options.accelerate_plugin is not None:
        parse_plugin(task.options.accelerate_plugin)
    if task.options.zero_stage is not None and task.options.accelerate_plugin != "deepspeed":
        raise SpecError("--zero-stage goes with deepspeed or accelerate --accelerate-plugin deepspeed, not accelerate"
                        + (f" --accelerate-plugin {plugin}" if (plugin := task.options.accelerate_plugin) else ""))
    if task.options.accelerate_plugin == "deepspeed":
        if task.options.zero_stage is None:
            raise SpecError("accelerate --accelerate-plugin deepspeed needs --zero-stage 1, 2 or 3")
        deepspeed_options.parse_stage(str(task.options.zero_stage))
    if task.options.accelerate_plugin and (spec.independent or task.options.checkpoint_every_epoch):
        raise SpecError(f"accelerate --accelerate-plugin {task.options.accelerate_plugin} has no --independent or "
                        "--checkpoint-every-epoch here yet: drop them, or run accelerate without a plugin")
    if task.options.accelerate_plugin and spec.device_type != "cuda":
        raise SpecError(f"accelerate --accelerate-plugin {task.options.accelerate_plugin} needs CUDA (on a CPU Accelerate "
                        "runs the plugin as plain DDP): on CPU use torch-fsdp or deepspeed")
