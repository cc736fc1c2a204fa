"""The registry of variants: one approach each, its framework, launcher and reach."""
from __future__ import annotations

from dataclasses import dataclass

from bench.task import SpecError


@dataclass(frozen=True)
class Variant:
    name: str
    framework: str             # distribution name, for version capture
    launcher: str              # what starts its processes
    module: str                # python module run inside each worker process
    single_process: bool       # drives all of a node's devices from one process
    spans_nodes: bool          # can run on more than one (fake) node
    cpu_max_devices: int | None  # None: any number of CPU slots
    extra: str                 # pip extra that installs its framework
    summary: str

    def devices_allowed(self, device_type: str) -> int | None:
        return self.cpu_max_devices if device_type == "cpu" else None


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("torch-ddp", "torch", "torchrun", "torch_impl.ddp", single_process=False,
            spans_nodes=True, cpu_max_devices=None, extra="torch",
            summary="PyTorch DistributedDataParallel under torchrun (gloo on CPU, nccl on CUDA)"),
    # nn.DataParallel on a CPU-only machine runs the plain module: one slot, no pretending to scale.
    Variant("torch-dp", "torch", "python", "torch_impl.dp", single_process=True,
            spans_nodes=False, cpu_max_devices=1, extra="torch",
            summary="PyTorch nn.DataParallel, one process over the visible GPUs (CPU: one slot only)"),
)}


def get_variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise SpecError(f"unknown variant {name!r}: choose one of {', '.join(VARIANTS)} (see `python -m bench list`)")
    return VARIANTS[name]


def not_applicable(variant: Variant, device_type: str, nodes: int, devices_per_node: int) -> str | None:
    """Why this variant cannot run this topology (None when it can)."""
    if nodes > 1 and not variant.spans_nodes:
        return f"{variant.name} is a single process and cannot span {nodes} nodes"
    limit = variant.devices_allowed(device_type)
    if limit is not None and nodes * devices_per_node > limit:
        return (f"{variant.name} on {device_type} runs at most {limit} device slot(s): "
                "DataParallel on CPU runs the plain module")
    return None
