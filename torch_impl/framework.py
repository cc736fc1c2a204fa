"""PyTorch as dtbench's harness knows it (bench.spec.frameworks): standard library only, so that the harness and
every rank can read it without importing torch."""
from __future__ import annotations

import shutil

from bench.spec.frameworks import Framework


def compile_problem() -> str | None:
    """torch.compile's inductor writes C++ kernels on CPU: a machine with no compiler cannot run --compile."""
    if any(shutil.which(name) for name in ("c++", "g++", "clang++")):
        return None
    return ("--compile needs a C++ compiler for torch.compile's inductor (none of c++, g++, clang++ on PATH): "
            "install one (apt-get install g++) or drop --compile")


def kernel_summary(kernels: dict, switches: dict) -> list[str]:
    """The report header's line of what PyTorch dispatched to (recorded by torch_impl.kernels in every rank)."""
    parts = [f"{kernels.get('cpu_dispatch') or '-'} dispatch", f"oneDNN {'on' if kernels.get('onednn') else 'off'}",
             f"BLAS {kernels.get('blas') or '-'}",
             f"channels_last {'on' if switches.get('channels_last') else 'off'}",
             f"torch.compile {'on' if switches.get('compile') else 'off'}"]
    if kernels.get("cudnn"):
        parts.append(f"cuDNN {kernels['cudnn']} (autotuning {'on' if switches.get('cudnn_benchmark') else 'off'}), "
                     f"TF32 {'on' if switches.get('tf32') else 'off'}, NCCL {kernels.get('nccl') or '-'}")
    return parts


FRAMEWORK = Framework(
    name="torch", title="PyTorch", package="torch", extra="torch", model_check="torch_impl.model",
    # PyTorch's own approaches, then the wrappers around it (DeepSpeed, Lightning, Accelerate).
    panels=("PyTorch", "PyTorch wrappers"),
    model_libraries=("timm", "torchvision"), paired_library="timm", builds_from="timm's or dtbench's",
    model_types=("torch.nn",), distributions=("torch", "torchvision", "timm"),
    plain_loop=("torch-single", "probes.plain_loop"),
    input_phases=True,  # every PyTorch approach trains through torch_impl/train.py's loop
    not_offered=("Keras 3 compile + fit on the PyTorch backend: its data parallelism (DDP) is on Keras' development "
                 "branch only (keras PR #23316); keras 3.15.1, the release, has none",),
    kernel_summary="torch_impl.framework:kernel_summary",
    # probes/collectives.py times torch.distributed's gloo/nccl all-reduce: DDP's and Accelerate's gradients cross
    # the same one. The sharded ones (FSDP, DeepSpeed) move other collectives.
    probed_collectives=("torch", "accelerate"),
    # PyTorch's switches (cuDNN autotuning, TF32, channels_last) are set inside its ranks (torch_impl.fast_path).
    compile_problem="torch_impl.framework:compile_problem",
)
