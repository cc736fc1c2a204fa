"""All-reduce microbenchmark (in the manner of nccl-tests): time per all_reduce of each size.

algbw = bytes / time; busbw = algbw x 2(n-1)/n, the traffic each link of a ring really carries,
comparable across world sizes. Launched by torchrun like torch-ddp, on the same pinning.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl.train import set_threads

SIZES = [1 << k for k in range(12, 27, 2)]  # 4 KiB .. 64 MiB
BYTES_PER_ITERATION_BUDGET = 1 << 30       # fewer repeats for large messages


def main() -> None:
    worker = Worker(spec_path_from_argv())
    with worker.session():
        set_threads(worker.pin())
        cuda = worker.device_type == "cuda"
        dist.init_process_group("nccl" if cuda else "gloo")
        device = torch.device("cuda", worker.cuda_device(torch.cuda.device_count())) if cuda else torch.device("cpu")
        if cuda:
            torch.cuda.set_device(device)
        n = dist.get_world_size()
        worker.joined(n, backend=dist.get_backend())

        def sync() -> None:
            if cuda:
                torch.cuda.synchronize(device)
            dist.barrier()

        measured = []
        for size in SIZES:
            tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
            iterations = max(5, min(50, BYTES_PER_ITERATION_BUDGET // size))
            for _ in range(3):  # warm-up: connection set-up, buffer allocation
                dist.all_reduce(tensor)
            sync()
            start = time.perf_counter()
            for _ in range(iterations):
                dist.all_reduce(tensor)
            sync()
            seconds = (time.perf_counter() - start) / iterations
            algbw = size / seconds
            measured.append({"size_bytes": size, "seconds": seconds, "algbw_gbps": algbw / 1e9,
                             "busbw_gbps": algbw * 2 * (n - 1) / n / 1e9, "iterations": iterations})
        worker.record("allreduce", backend=dist.get_backend(), results=measured)
        dist.destroy_process_group()
    exit_now(0)


if __name__ == "__main__":
    main()
