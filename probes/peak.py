"""The device's measured peak: large matrix multiplies per precision, timed (`python -m bench peak`).

One process on one device slot (all its cores on a CPU). For each precision the matrix grows until
one multiply takes long enough to time well (or the size cap), then the best of several timed
windows counts, warm-up excluded, the device synchronised at each window's ends. 2 n^3 FLOPs a multiply.
"""
from __future__ import annotations

import time

import torch

from bench.spec.rank_record import Peak
from bench.worker import Worker, spec_path_from_argv
from torch_impl.train import device_info, single_process_device

WINDOW_S = 0.5        # each timed window lasts about this long
WINDOWS = 5
MAX_SIDE = {"cpu": 2048, "cuda": 8192}
DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def measure(device: torch.device, precision: str) -> dict:
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    side = 256
    while True:  # grow until one multiply takes >= 20 ms (or the cap): launch overheads then vanish
        a = torch.randn(side, side, device=device).to(DTYPES[precision])
        b = torch.randn(side, side, device=device).to(DTYPES[precision])
        a @ b  # warm-up: kernels chosen, memory allocated
        sync()
        start = time.perf_counter()
        a @ b
        sync()
        seconds = time.perf_counter() - start
        if seconds >= 0.02 or side >= MAX_SIDE[device.type]:
            break
        side *= 2
    repeats = max(1, int(WINDOW_S / max(seconds, 1e-6)))
    best = float("inf")
    for _ in range(WINDOWS):
        sync()
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        sync()
        best = min(best, (time.perf_counter() - start) / repeats)
    return {"precision": precision, "side": side, "seconds": best, "flops_per_s": 2 * side**3 / best}


def main() -> None:
    worker = Worker(spec_path_from_argv())
    with worker.session():
        device = single_process_device(worker)
        info = device_info(device)
        worker.joined(1, backend="none", **info)
        precisions = ["fp32", "bf16"] + (["tf32", "fp16"] if device.type == "cuda" else [])
        worker.record(Peak(device_type=device.type, device_name=info["device_name"], threads=info["threads"],
                           results=[measure(device, p) for p in precisions]))


if __name__ == "__main__":
    main()
