"""The commands of one topology: `bench run` (one run), `bench maxbatch` (its largest batch), `bench peak` and
`bench collectives` (the device's and the links' own figures)."""
from __future__ import annotations

import dataclasses
import sys

from bench import request
from bench.commands.common import chosen_interface, conclude, one_run, print_table
from bench.request import Request
from bench.spec import devices
from bench.spec import frameworks
from bench.spec.task import SpecError
from bench.status import Status
from bench.sweep import plan


def cmd_run(args: Request) -> int:
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    spec = one_run(args, device_type, "run")
    variant, task = spec.variant, spec.task
    [(engine, address)] = request.engines(args)  # one: the request's check
    spec = dataclasses.replace(spec, engine=engine, engine_address=address)
    spec = dataclasses.replace(spec, interface=chosen_interface(args))
    plan.check_all([spec], machine)  # before the harness's heavy imports: a bad request answers at once
    from bench.sweep import runner
    from bench.run.execute import execute
    from bench.worker import data

    gpu_problem = variant.plugin.gpu_problem
    if gpu_problem and device_type == "cuda":
        if problem := frameworks.load(gpu_problem)(variant.name, list(spec.check(machine).nodes[0].cuda_visible)):
            raise SpecError(problem)

    if args.host_node not in (None, 0):  # a node agent of a multi-host run: node 0's host keeps the row
        row = execute(spec, args.out, machine, data.prepare(task))
        print(f"node {args.host_node}: {row.status}" + (f": {row.error}" if row.error else ""))
        return 0 if row.status == Status.OK else 1
    rows = runner.run_all([spec], args.out, machine, args.mlflow)
    print_table(rows, conclude(args.out, rows, args))
    return 0 if rows[0].status == Status.OK else 1


def cmd_maxbatch(args: Request) -> int:
    """The largest global batch the variant trains on --devices (bench.studies.maxbatch); probes under OUT/maxbatch."""
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    if args.device_memory_gib is None and device_type == "cpu":
        raise SpecError("on a CPU the search needs a memory to fill: pass --device-memory GIB (each rank's), "
                        "e.g. --device-memory 3")
    spec = one_run(args, device_type, "maxbatch")
    from bench.studies import maxbatch
    from bench.sweep import runner

    out = args.out / "maxbatch"
    found = maxbatch.search(spec, lambda probe: runner.run_all([probe], out, machine)[0], args.max_batch,
                            args.resolution)
    maxbatch.record(found, out)
    conclude(out, [], args)
    limit = f" under {args.device_memory_gib:g} GiB a rank" if args.device_memory_gib else ""
    if found.error:
        print(f"{found.label}: the search stopped{limit}: {found.error}")
        return 1
    above = f" ({found.smallest_failing} does not fit)" if found.smallest_failing else f" (all up to --max-batch {args.max_batch})"
    print(f"{found.label}: largest global batch that trains{limit}: {found.largest_fitting or 'none'}{above}; "
          f"{len(found.probes)} probes in {out}")
    return 0


def cmd_peak(args: Request) -> int:
    from bench.studies import microbench

    machine = devices.discover()
    measured = microbench.measure_peak(args.out, machine, request.device_type(args, machine), args.cores_per_slot)
    if not measured:
        print(f"error: the peak benchmark failed: see {args.out / 'runs'}", file=sys.stderr)
        return 1
    for r in measured:
        print(f"{r['device_type']} {r['device_name']} ({r['threads']} threads) {r['precision']:5} "
              f"{r['flops_per_s'] / 1e9:10,.1f} GFLOP/s  ({r['side']}x{r['side']} matmul)")
    print(f"\nappended to {args.out / 'peak.jsonl'}")
    return 0


def cmd_collectives(args: Request) -> int:
    """All-reduce, all-gather and reduce-scatter on one topology, as the sweep measures them, and their α–β fits:
    across real hosts (--node-rank on each), the link between nodes that `bench project --between-nodes` reads."""
    from bench.results import collectives
    from bench.studies import microbench

    machine = devices.discover()
    device_type = request.device_type(args, machine)
    interface = chosen_interface(args)
    across = ({} if args.host_node is None else
              dict(host_node=args.host_node, master_addr=args.master_addr, master_port=args.master_port,
                   interface=interface))
    measured = microbench.measure_collectives(args.out, machine, device_type, args.nodes, args.devices // args.nodes,
                                              timeout_s=args.timeout_s, **across)
    if args.host_node not in (None, 0):
        print(f"node {args.host_node}: {'failed: see ' + str(args.out / 'runs') if measured is None else 'ok'}")
        return 0 if measured is not None else 1
    if not measured:
        print(f"error: the collective microbenchmarks failed: see {args.out / 'runs'}", file=sys.stderr)
        return 1
    world = args.devices
    for fit in collectives.fits(measured):
        if fit.world_size == world:
            print(f"{fit.collective:15} {fit.backend} {fit.nodes}x{world // fit.nodes}: α {fit.alpha_s * 1e6:8.1f} µs  "
                  f"busbw {fit.busbw / 1e9:7.3f} GB/s  worst residual {fit.worst_residual:.0%}")
    print(f"\nappended to {args.out / 'allreduce.jsonl'} and {args.out / collectives.FILE}")
    return 0
