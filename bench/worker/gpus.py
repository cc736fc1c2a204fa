"""Which GPU a rank trains on, decided from what its own process can see. Standard library only.

Launchers differ: torchrun shows a node's ranks all of the node's GPUs (the rank takes the one at its
LOCAL_RANK); Spark on a cluster and dask-cuda workers that see one GPU each show one (cuda:0); Ray
names the GPU it gave the worker; dask-cuda rotates CUDA_VISIBLE_DEVICES so each worker's own comes first.
"""
from __future__ import annotations

TF_PYTHON_ENV = "DTBENCH_TF_PYTHON"  # a TensorFlow interpreter of the user's own (SETUP=none boxes)
CUDA_DEVICE_ENV = "DTBENCH_CUDA_DEVICE"  # the index an engine's rank chose, for the variant's code


class GPUChoiceError(RuntimeError):
    """A rank cannot tell which GPU is its own."""


def visible_gpus(cuda_visible_devices: str | None, device_count: int) -> list[str]:
    """The GPUs a process sees, as CUDA_VISIBLE_DEVICES names them (by index when it is unset)."""
    if cuda_visible_devices is None:
        return [str(i) for i in range(device_count)]
    return [g.strip() for g in cuda_visible_devices.split(",") if g.strip()][:device_count]


def cuda_index(visible: list[str], local_rank: int, own: str | None = None) -> int:
    """The device index a rank trains on, from what its own process can see: the GPU its engine gave it
    (`own`, as CUDA_VISIBLE_DEVICES names it); the only one it sees; else the one at its LOCAL_RANK
    (a launcher that shows a node's ranks all of the node's GPUs, as torchrun does)."""
    if not visible:
        raise GPUChoiceError(f"rank with LOCAL_RANK={local_rank} sees no GPU: check CUDA_VISIBLE_DEVICES and the driver")
    if own is not None:
        if own not in visible:
            raise GPUChoiceError(f"the engine gave this rank GPU {own}, which it cannot see "
                            f"(CUDA_VISIBLE_DEVICES={','.join(visible)})")
        return visible.index(own)
    if len(visible) == 1:
        return 0
    if local_rank < len(visible):
        return local_rank
    raise GPUChoiceError(f"rank with LOCAL_RANK={local_rank} sees {len(visible)} GPUs ({','.join(visible)}): "
                    "give each node's ranks that node's GPUs, or each rank its own")


def rotated(visible_by_worker: list[list[str]]) -> bool:
    """dask-cuda's convention: each worker sees every GPU, its own first (the list rotated per worker)."""
    if len(visible_by_worker) < 2 or len({len(v) for v in visible_by_worker}) != 1 or len(visible_by_worker[0]) < 2:
        return False
    first = visible_by_worker[0]
    rotations = {tuple(first[i:] + first[:i]) for i in range(len(first))}
    heads = [v[0] for v in visible_by_worker]
    return all(tuple(v) in rotations for v in visible_by_worker) and len(set(heads)) == len(heads)


def gpus_not_seen(variant: str, given: list[str], seen: int, tensorflow: str, cuda_build: str | None,
                  python: str) -> str:
    """The one-line refusal of a TensorFlow variant that sees fewer GPUs than it was given, with its fix:
    from `tf_impl.framework.gpu_problem` before a run, and from the worker itself (tf_impl/train.py) inside a sweep."""
    build = f"a CUDA {cuda_build} build" if cuda_build else "a CPU-only build"
    fix = ("check the driver, CUDA_VISIBLE_DEVICES and TensorFlow's CUDA libraries" if cuda_build else
           f"install its GPU build (`make setup` on a GPU box makes .venv-tf) or set {TF_PYTHON_ENV} to a Python with one")
    return (f"{variant} asked for cuda on {len(given)} GPU(s) ({','.join(given)}), but {tensorflow} ({build}, "
            f"{python}) sees {seen}: {fix}")

