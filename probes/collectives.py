"""Collective microbenchmarks (in the manner of nccl-tests): time per all-reduce, all-gather and reduce-scatter of
each size, the traffic of every approach (DDP all-reduces gradients; FSDP and ZeRO-3 gather parameters and
reduce-scatter gradients).

size = the larger buffer (all-gather's output, reduce-scatter's input, as nccl-tests counts it);
algbw = size / time; busbw = algbw x the bytes each link of a ring carries per byte of size: 2(n-1)/n for an
all-reduce, (n-1)/n for an all-gather or a reduce-scatter, comparable across world sizes. Launched by torchrun
like torch-ddp, on the same pinning.
"""
from __future__ import annotations

import time

import torch
import torch.distributed as dist

from bench.spec.collectives import BUS_FACTOR
from bench.spec.rank_record import Collectives
from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl.train import set_threads

SIZES = [1 << k for k in range(12, 27, 2)]  # 4 KiB .. 64 MiB
BYTES_PER_ITERATION_BUDGET = 1 << 30       # fewer repeats for large messages
SECONDS_PER_SIZE = 2.0                     # and on slow links: the timed calls of a size take about this long


def collectives(n: int, device: torch.device) -> dict:
    """Per collective: (make its buffers for a size, call it once)."""
    def all_reduce(size):
        tensor = torch.ones(size // 4, dtype=torch.float32, device=device)
        return lambda: dist.all_reduce(tensor)

    def all_gather(size):
        out = torch.empty(size // 4 // n * n, dtype=torch.float32, device=device)
        shard = torch.ones(size // 4 // n, dtype=torch.float32, device=device)
        return lambda: dist.all_gather_into_tensor(out, shard)

    def reduce_scatter(size):
        full = torch.ones(size // 4 // n * n, dtype=torch.float32, device=device)
        shard = torch.empty(size // 4 // n, dtype=torch.float32, device=device)
        return lambda: dist.reduce_scatter_tensor(shard, full)

    return {"all_reduce": all_reduce, "all_gather": all_gather, "reduce_scatter": reduce_scatter}


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

        def slowest(seconds: float) -> float:
            """The slowest rank's time: every rank must choose the same number of calls, or the collective hangs."""
            agreed = torch.tensor([seconds], dtype=torch.float64, device=device)
            dist.all_reduce(agreed, op=dist.ReduceOp.MAX)
            return float(agreed.item())

        measured = []
        for name, make in collectives(n, device).items():
            for size in SIZES:
                call = make(size)
                sync()
                start = time.perf_counter()
                call()  # warm-up: connection set-up, buffer allocation; timed to size the measurement
                sync()
                first = slowest(time.perf_counter() - start)
                for _ in range(2 if first < 0.1 else 0):  # more warm-up where it is cheap
                    call()
                iterations = max(3, min(50, BYTES_PER_ITERATION_BUDGET // size, int(SECONDS_PER_SIZE / first)))
                sync()
                start = time.perf_counter()
                for _ in range(iterations):
                    call()
                sync()
                seconds = (time.perf_counter() - start) / iterations
                algbw = size / seconds
                measured.append({"collective": name, "size_bytes": size, "seconds": seconds,
                                 "algbw_gbps": algbw / 1e9, "busbw_gbps": algbw * BUS_FACTOR[name](n) / 1e9,
                                 "iterations": iterations})
                if first > SECONDS_PER_SIZE:
                    break  # a link this slow: the larger sizes add minutes, and nothing the fit lacks
        worker.record(Collectives(backend=dist.get_backend(), results=measured))
        dist.destroy_process_group()
    exit_now(0)


if __name__ == "__main__":
    main()
