"""The peer: the measurement of timm's own `benchmark.py --bench train`, written here (timm's script ships in its
source, not its wheel), so that dtbench is held against what timm's users read.

As timm's TrainBenchmarkRunner (pytorch-image-models at 066e490, benchmark.py) measures it: `timm.create_model`
with random weights, `create_optimizer_v2(opt=--opt, lr=1e-4)` (timm's "sgd", its default: SGD with momentum 0.9
and Nesterov; "momentum": the same without Nesterov, dtbench's recipe), one
`torch.randn` input batch reused, fresh random targets every step, `--num-warm-iter` steps untimed (10), then
`--num-bench-iter` steps (40); "amp" autocasts to fp16 as timm's does (amp_bfloat16 to bf16: dtbench's bf16,
which timm's script has no flag for; its "bfloat16" casts the whole model instead); throughput = samples / the seconds of all timed steps together (its mean), each
step ended by a device sync on CUDA. It also keeps each step's seconds, so that the median of windows that
dtbench reports can be read from the same steps. Prints one JSON line. Runs alone: `python -m probes.timm_train`.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

import torch

from bench.spec.rank_spec import RankSpec


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="a timm model name, e.g. resnet18")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--img-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--precision", choices=("float32", "bfloat16", "amp_bfloat16", "amp"), default="float32")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--opt", default="sgd", help="timm's optimizer name (default sgd: Nesterov momentum, as timm's "
                                                "benchmark.py ships; momentum: classic momentum, dtbench's SGD)")
    p.add_argument("--num-warm-iter", type=int, default=10)
    p.add_argument("--num-bench-iter", type=int, default=40)
    p.add_argument("--cores", default="", help="pin to these cores (comma-separated) and size torch's pool to them")
    p.add_argument("--spec", help="a run's spec.json: pin to its first slot's cores, as its rank is (bench overhead)")
    args = p.parse_args(argv)
    cores = ({int(c) for c in args.cores.split(",")} if args.cores else
             set(next(iter(RankSpec.load(args.spec).node_plans[0].cpu_slots), [])) if args.spec else None)
    if cores:
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
    print(json.dumps(run(args)))


def run(args: argparse.Namespace) -> dict:
    import timm
    from timm.optim import create_optimizer_v2

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True  # as timm's benchmark.py sets it at its top
    model = timm.create_model(args.model, pretrained=False, num_classes=args.num_classes, in_chans=args.channels)
    layout = torch.channels_last if args.channels_last else torch.contiguous_format
    model.to(device=device, memory_format=layout).train()
    optimizer = create_optimizer_v2(model, opt=args.opt, lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss().to(device)
    inputs = torch.randn((args.batch_size, args.channels, args.img_size, args.img_size), device=device)
    inputs = inputs.contiguous(memory_format=layout)
    autocast = (torch.autocast(device.type, dtype=torch.bfloat16 if "bfloat16" in args.precision else torch.float16)
                if args.precision.startswith("amp") else contextlib.nullcontext())

    def now(sync: bool = False) -> float:
        if cuda and sync:
            torch.cuda.synchronize(device)
        return time.perf_counter()

    def step() -> float:
        optimizer.zero_grad()
        start = now()
        with autocast:
            output = model(inputs)
            target = torch.empty((output.shape[0],), device=device, dtype=torch.long).random_(args.num_classes)
            loss_fn(output, target).backward()
        optimizer.step()
        return now(sync=True) - start

    for _ in range(args.num_warm_iter):
        step()
    run_start = now(sync=True)
    step_seconds = [step() for _ in range(args.num_bench_iter)]
    elapsed = now() - run_start
    samples = args.batch_size * args.num_bench_iter
    return {"samples_per_sec": samples / elapsed, "step_seconds": step_seconds, "batch_size": args.batch_size,
            "img_size": args.img_size, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "torch": torch.__version__, "timm": timm.__version__, "opt": args.opt,
            "nesterov": bool(optimizer.defaults.get("nesterov")), "threads": torch.get_num_threads()}


if __name__ == "__main__":
    main()
