"""`python -m bench`: list, run, sweep, report, data, overhead."""
from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from bench.interrupt import Interrupted, stop_on_signals
from bench.results.store import StoreError
from bench.run import plan
from bench.run.runspec import RunSpec
from bench.spec import devices, options
from bench.spec.task import (DATASET_SHAPES, DATASETS, FILE_INPUTS, INPUTS, LR_SCALINGS,
                             OPTIMIZERS, PRECISIONS, PRESETS, SCALINGS, SCHEDULES, WEAK_SCALING_WARMUP_EPOCHS,
                             SpecError, TaskSpec, get_task)
from bench.spec.variants import ENGINES, VARIANTS, check_engine, default_variants, get_variant

log = logging.getLogger("bench")
DEFAULT_OUT = Path("results/latest")


def input_modes(args: argparse.Namespace) -> list[dict]:
    """The task fields of every input pipeline named (input, loader_workers, data_url): a file input once per
    --loader-workers count."""
    inputs = [i.strip() for i in (args.input or "memory").split(",") if i.strip()]
    try:
        workers = [int(w) for w in str(args.loader_workers).split(",") if w.strip()]
    except ValueError:
        raise SpecError(f"--loader-workers {args.loader_workers!r}: give counts, e.g. 2 or 0,1,2") from None
    if not inputs or not workers:
        raise SpecError("--input and --loader-workers need a value each, e.g. --input files --loader-workers 2")
    for name in inputs:
        if name not in INPUTS:
            raise SpecError(f"unknown input {name!r}: choose one of {', '.join(INPUTS)}")
    if any(workers) and not any(i in FILE_INPUTS for i in inputs):
        raise SpecError("--loader-workers goes with --input files or s3 (the in-memory input has no decoders)")
    if args.data_url and "s3" not in inputs:
        raise SpecError("--data-url goes with --input s3")
    pairs = list(dict.fromkeys((i, w) for i in inputs for w in (workers if i in FILE_INPUTS else [0])))
    if args.command != "sweep" and len(pairs) != 1:
        raise SpecError("bench run takes one --input and one --loader-workers: use bench sweep to compare several")
    return [{"input": i, "loader_workers": w, "data_url": args.data_url if i == "s3" else None} for i, w in pairs]


def _task_from(args: argparse.Namespace, device_type: str) -> TaskSpec:
    # GPUs train in bf16 unless told otherwise; CPUs keep the task's own precision (fp32).
    precision = args.precision or ("bf16" if device_type == "cuda" else None)
    # A run's --compile trains compiled; a sweep's runs every configuration eager and compiled.
    compiled = args.compile if args.command != "sweep" else None
    # A sweep scales weak unless told (the field's convention), one run strong (its global batch as given).
    scaling = args.scaling or ("weak" if args.command == "sweep" else "strong")
    [first_mode, *more_modes] = input_modes(args)
    data_dir = args.data_dir and str(Path(args.data_dir).resolve())  # the ranks start in the repository
    task = get_task(args.task, global_batch=args.global_batch, precision=precision, epochs=args.epochs,
                    windows=args.windows, data_dir=data_dir, compile=compiled, **first_mode,
                    checkpoint_every_epoch=args.checkpoint_every_epoch or None, scaling=scaling,
                    per_device_batch=args.per_device_batch, lr_scaling=args.lr_scaling, optimizer=args.optimizer,
                    lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay, schedule=args.schedule,
                    warmup_epochs=args.warmup_epochs, lr_step_epochs=args.lr_step_epochs, lr_gamma=args.lr_gamma,
                    dataset=args.dataset, val_split=args.val_split)
    for mode in more_modes:
        task.replace(**mode).validate()
    if task.dataset == "imagefolder":  # classes, channels and size come from the folder
        from bench.worker import imagefolder

        task = imagefolder.describe(task, args.image_size)
    elif args.image_size or args.val_split:
        raise SpecError("--image-size and --val-split go with --dataset imagefolder --data-dir DIR")
    elif args.dataset in DATASET_SHAPES:  # another bundled dataset: its own image size, channels and classes
        side, channels, classes = DATASET_SHAPES[args.dataset]
        task = task.replace(image_size=side, channels=channels, classes=classes)
    for mode in [first_mode, *more_modes]:
        if mode["input"] == "s3":  # the bucket reachable, readable and holding this task's images
            from bench.worker import data

            data.check_remote(task.replace(**mode))
            break
    return task


def _device_type(args: argparse.Namespace, machine: devices.Machine) -> str:
    return machine.default_device_type if args.device_type == "auto" else args.device_type


def _add_task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="default", help=f"task preset: {', '.join(PRESETS)}")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="fp32 | bf16 | fp16 (fp16 needs CUDA); default: the task's (fp32) on CPU, bf16 on CUDA")
    p.add_argument("--global-batch", type=int, help="override the task's global batch")
    p.add_argument("--epochs", type=int, help="override the task's epochs")
    p.add_argument("--windows", type=int, help="override the number of timing windows")
    p.add_argument("--data-dir", help="dataset files (Fashion-MNIST idx files, or an image folder)")
    p.add_argument("--input", help="memory: the cached dataset (default); files: image files through the framework's "
                                   "file pipeline (ImageFolder + DataLoader, tf.data); s3: the same from --data-url; "
                                   "synthetic: one batch made on the device, the input pipeline left out "
                                   "(a sweep takes several, comma-separated)")
    p.add_argument("--loader-workers", default="0", help="files | s3: parallel decoders (DataLoader worker "
                                                          "processes, tf.data map threads), their cores taken from "
                                                          "the slot's; 0 decodes in the training loop (default); "
                                                          "a sweep takes several, e.g. 0,1,2")
    p.add_argument("--data-url", help="--input s3: s3://BUCKET/PREFIX holding an image folder; the endpoint and "
                                      "credentials come from the AWS environment (AWS_ENDPOINT_URL, "
                                      "AWS_ACCESS_KEY_ID, ...)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile (Accelerate: its dynamo plugin) / TensorFlow XLA; a sweep runs every "
                        "configuration eager and compiled; the compile time is the row's compile_s")
    options.add_arguments(p)  # each approach's own (--zero-stage, --accelerate-plugin)
    p.add_argument("--checkpoint-every-epoch", action="store_true",
                   help="save model + optimizer after each epoch the approach's own way; the row times the save "
                        "(the training stall) and loading it back, and counts its bytes")
    p.add_argument("--scaling", choices=SCALINGS,
                   help="weak: each device keeps --per-device-batch and the global batch grows with the devices "
                        "(sweep default); strong: the global batch is split over them (run default)")
    p.add_argument("--per-device-batch", type=int, help="weak scaling: each device's batch (default: the task's "
                                                         "batch at one device)")
    p.add_argument("--lr-scaling", choices=LR_SCALINGS,
                   help="weak scaling: linear (default) multiplies the learning rate by the devices, with a "
                        f"warm-up ({WEAK_SCALING_WARMUP_EPOCHS} epochs unless --warmup-epochs); none keeps it")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="the task's optimizer (default sgd, momentum 0.9)")
    p.add_argument("--lr", type=float, help="base learning rate (one device's)")
    p.add_argument("--momentum", type=float, help="SGD momentum")
    p.add_argument("--weight-decay", type=float, help="L2 in the gradient (sgd, adam); decoupled (adamw)")
    p.add_argument("--schedule", choices=SCHEDULES, help="after the warm-up: constant (default), step "
                                                         "(x --lr-gamma every --lr-step-epochs), cosine (to 0)")
    p.add_argument("--warmup-epochs", type=float, help="linear learning-rate warm-up, in epochs (default 0)")
    p.add_argument("--lr-step-epochs", type=int, help="--schedule step: epochs between decays (default 1)")
    p.add_argument("--lr-gamma", type=float, help="--schedule step: the factor of each decay (default 0.1)")
    p.add_argument("--dataset", choices=DATASETS, help="override the task's dataset; imagefolder reads --data-dir")
    p.add_argument("--val-split", type=float, help="imagefolder without test/ or val/: this fraction of each class, "
                                                   "seeded, is the test set")
    p.add_argument("--image-size", type=int, help="imagefolder: resize to this side (default: the folder's)")
    p.add_argument("--device-type", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda when GPUs are visible, else cpu (default: auto)")
    p.add_argument("--cores-per-slot", type=int, default=1, help="CPU cores per device slot (default 1)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before a run is killed (default 900)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (default results/latest)")


def _add_engine_options(p: argparse.ArgumentParser, several: bool) -> None:
    p.add_argument("--engine", default="torchrun",
                   help=f"what starts the ranks of torch-ddp and accelerate: {' | '.join(ENGINES)} "
                        + ("(comma-separated: each is a dimension of the report) " if several else "")
                        + "(default torchrun: the variant's own launcher)")
    p.add_argument("--ray-address", help="--engine ray: an existing Ray cluster (default: a local one per run)")
    p.add_argument("--spark-master", help="--engine spark: a master URL, e.g. local-cluster[2,1,1024] "
                                          "(default: a local session, TorchDistributor local_mode)")
    p.add_argument("--dask-scheduler", help="--engine dask: a scheduler address (default: a LocalCluster per run)")
    p.add_argument("--mlflow", metavar="URI", help="also log each run to MLflow, e.g. sqlite:///mlruns.db "
                                                   "(spec as params, figures as metrics)")


def _engines(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    """(engine, the cluster address given for it) for every engine named."""
    addresses = {"ray": args.ray_address, "spark": args.spark_master, "dask": args.dask_scheduler}
    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    for engine in engines:
        check_engine(engine)
    return [(engine, addresses.get(engine)) for engine in engines]


def cmd_list(args: argparse.Namespace) -> int:
    machine = devices.discover()
    print("variants:")
    for v in VARIANTS.values():
        where = f"cpu ({v.cpu_max_per_node}/node), cuda" if v.cpu_max_per_node else "cpu, cuda"
        print(f"  {v.name:16} {where:20} launcher={v.launcher:9} {v.summary}")
    print("tasks:")
    for t in PRESETS.values():
        print(f"  {t.name:10} {t.model:10} on {t.dataset:14} {t.image_size}px batch={t.global_batch} "
              f"epochs={t.epochs} {t.precision}")
    print("devices:")
    print(f"  cpu: {len(machine.cores)} cores available ({', '.join(map(str, machine.cores))})")
    if machine.gpus:
        for gid, name in zip(machine.gpus, machine.gpu_names):
            print(f"  cuda:{gid} {name}")
    else:
        print("  cuda: none found")
    return 0


def _print_table(rows, out: Path) -> None:
    """The report's lines (the whole folder folded, as report.md) for the configurations just run."""
    from bench import results
    from bench.analysis import aggregate, peak, report

    configs = aggregate.configurations(results.load(out), peak.load(out))
    ran = {r.key for r in rows}
    print(report.text_table(configs[[key in ran for key in configs["key"]]].reset_index(drop=True)))


def cmd_run(args: argparse.Namespace) -> int:
    machine = devices.discover()
    device_type = _device_type(args, machine)
    task = _task_from(args, device_type)
    variant = get_variant(args.variant)
    if args.devices < 1 or args.nodes < 1:
        raise SpecError("--devices and --nodes must be at least 1")
    if args.devices % args.nodes:
        raise SpecError(f"--devices {args.devices} does not divide by --nodes {args.nodes}: pick a multiple")
    shardings = options.modes(variant, options.given(args), sweep=False)
    if len(shardings) != 1:
        raise SpecError("bench run takes one value of each approach option: use bench sweep to compare several")
    [sharding] = shardings
    task = task.replace(**sharding)
    task.validate()
    spec = RunSpec(variant, task.for_world(args.devices), device_type, args.nodes, args.devices // args.nodes,
                         args.cores_per_slot, args.timeout, host_node=args.node_rank,
                         master_addr=args.master_addr, master_port=args.master_port,
                         independent=args.independent, resume_from=args.resume_from and args.resume_from.resolve())
    engines = _engines(args)
    if len(engines) != 1:
        raise SpecError("bench run takes one --engine: use bench sweep to compare several")
    [(engine, address)] = engines
    spec = dataclasses.replace(spec, engine=engine, engine_address=address)
    reason = spec.inapplicable()
    if reason:
        raise SpecError(f"{reason}: choose another variant or fewer devices")
    from bench.worker import data
    from bench.run import sweep
    from bench.run.execute import execute

    if variant.framework.startswith("tensorflow") and device_type == "cuda":
        from bench.run.interpreters import require_tf_gpus

        require_tf_gpus(variant, spec.check(machine).nodes[0].cuda_visible)

    if args.node_rank not in (None, 0):  # a node agent of a multi-host run: node 0's host keeps the row
        row = execute(spec, args.out, machine, data.prepare(task))
        print(f"node {args.node_rank}: {row.status}" + (f": {row.error}" if row.error else ""))
        return 0 if row.status == "ok" else 1
    rows = sweep.run_all([spec], args.out, machine, args.mlflow)
    _print_table(rows, args.out)
    return 0 if rows[0].status == "ok" else 1


def cmd_maxbatch(args: argparse.Namespace) -> int:
    """The largest global batch the variant trains on --devices (bench.run.maxbatch); probes under OUT/maxbatch."""
    machine = devices.discover()
    device_type = _device_type(args, machine)
    variant = get_variant(args.variant)
    if args.memory_limit is not None and args.memory_limit <= 0:
        raise SpecError(f"--memory-limit {args.memory_limit}: give each rank's memory in MiB, e.g. 4000")
    if args.memory_limit is not None and device_type == "cuda":
        raise SpecError("--memory-limit caps a CPU rank's memory: on GPUs the device's own memory is the limit, "
                        "drop --memory-limit")
    if args.max_batch < args.devices:
        raise SpecError(f"--max-batch {args.max_batch} is below one sample a device: give at least {args.devices}")
    if args.memory_limit is None and device_type == "cpu":
        raise SpecError("on a CPU the search needs a memory to fill: pass --memory-limit MiB (each rank's), "
                        "e.g. --memory-limit 3000")
    if args.devices < 1 or args.devices % args.nodes:
        raise SpecError(f"--devices {args.devices} must be at least 1 and divide by --nodes {args.nodes}")
    shardings = options.modes(variant, options.given(args), sweep=False)
    if len(shardings) != 1:
        raise SpecError("bench maxbatch takes one value of each approach option")
    task = _task_from(args, device_type).replace(**shardings[0])
    task.validate()
    spec = RunSpec(variant, task.for_world(args.devices), device_type, args.nodes, args.devices // args.nodes,
                   args.cores_per_slot, args.timeout, memory_limit_mb=args.memory_limit)
    if reason := spec.inapplicable():
        raise SpecError(f"{reason}: choose another variant or fewer devices")
    from bench.run import maxbatch, sweep

    out = args.out / "maxbatch"
    if args.resolution < 1:
        raise SpecError(f"--resolution {args.resolution}: at least 1 sample a device")
    found = maxbatch.search(spec, lambda probe: sweep.run_all([probe], out, machine)[0], args.max_batch,
                            args.resolution)
    maxbatch.record(found, out)
    limit = f" under {args.memory_limit:g} MiB a rank" if args.memory_limit else ""
    if found.error:
        print(f"{found.label}: the search stopped{limit}: {found.error}")
        return 1
    above = f" ({found.smallest_failing} does not fit)" if found.smallest_failing else f" (all up to --max-batch {args.max_batch})"
    print(f"{found.label}: largest global batch that trains{limit}: {found.largest_fitting or 'none'}{above}; "
          f"{len(found.probes)} probes in {out}")
    return 0


def _sweep_machine(args: argparse.Namespace) -> devices.Machine:
    """This machine, or with --assume-gpus the GPU box a --dry-run plans for."""
    machine = devices.discover()
    if args.assume_gpus is None:
        return machine
    if not args.dry_run:
        raise SpecError("--assume-gpus only plans: add --dry-run (a real sweep uses the GPUs it finds)")
    if args.assume_gpus < 1:
        raise SpecError(f"--assume-gpus {args.assume_gpus}: assume at least 1 GPU, or drop it to plan for this machine")
    if args.device_type == "cpu":
        raise SpecError("--assume-gpus plans GPU runs: drop --device-type cpu (or --assume-gpus)")
    from bench.run import preview

    return preview.assumed_machine(args.assume_gpus, machine.cores)


def cmd_sweep(args: argparse.Namespace) -> int:
    machine = _sweep_machine(args)
    device_type = _device_type(args, machine)
    task = _task_from(args, device_type)
    if args.variants in ("all", ""):
        # The single-device baselines belong to the scaling analysis.
        variants = [v for v in default_variants() if args.analysis or v.max_devices is None]
    else:
        variants = [get_variant(n.strip()) for n in args.variants.split(",")]
    counts = plan.device_counts(args.max_devices)
    named = options.given(args)
    options.refuse_untaken(named, variants)
    specs = plan.plan(variants, task, device_type, counts, args.nodes, engines=_engines(args),
                       variants_named=args.variants not in ("all", ""),
                       cores_per_slot=args.cores_per_slot, timeout_s=args.timeout, analysis=args.analysis,
                       repeats=args.repeats, compiled=args.compile, inputs=input_modes(args),
                       shardings={v.name: options.modes(v, named, sweep=True) for v in variants})
    from bench.analysis import report
    from bench.run import resume, sweep

    if args.allow_mixed_revisions and not args.resume:
        raise SpecError("--allow-mixed-revisions goes with --resume")
    if args.resume:
        planned, specs = len(specs), resume.remaining(specs, args.out, args.allow_mixed_revisions)
        print(f"resuming {args.out}: {planned - len(specs)} of {planned} planned runs are there, {len(specs)} left")
    if args.dry_run:
        from bench.run import preview

        print(preview.render(preview.build(specs, machine, args.out), machine, args.assume_gpus is not None,
                             args.out, args.analysis))
        return 0
    if args.analysis:  # first, so that every row gets its fraction of the measured peak
        sweep.measure_peak(args.out, machine, device_type, args.cores_per_slot, again=not args.resume)
    rows = sweep.run_all(specs, args.out, machine, args.mlflow)
    if args.analysis:
        sweep.measure_communication(rows, args.out, machine, again=not args.resume)
    _print_table(rows, args.out)
    path = report.write_report(args.out)
    print(f"\nrows appended to {args.out / 'results.jsonl'} (+ results.csv); report in {path}")
    return 0 if all(r.status in ("ok", "skipped") for r in rows) else 1


def cmd_peak(args: argparse.Namespace) -> int:
    from bench.run import microbench

    machine = devices.discover()
    measured = microbench.measure_peak(args.out, machine, _device_type(args, machine), args.cores_per_slot)
    if not measured:
        print(f"error: the peak benchmark failed: see {args.out / 'runs'}", file=sys.stderr)
        return 1
    for r in measured:
        print(f"{r['device_type']} {r['device_name']} ({r['threads']} threads) {r['precision']:5} "
              f"{r['flops_per_s'] / 1e9:10,.1f} GFLOP/s  ({r['side']}x{r['side']} matmul)")
    print(f"\nappended to {args.out / 'peak.jsonl'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from bench.analysis import report

    path = report.write_report(args.dir)
    print(path.read_text())
    return 0


def export_images(args: argparse.Namespace) -> int:
    """`bench data export-images --task T [--format png|jpeg] DIR|s3://BUCKET/PREFIX`: the task's dataset as an
    image folder, on disk or uploaded to object storage (the AWS environment names endpoint and credentials)."""
    import tempfile

    from bench.worker import data, imagefolder, s3

    if len(args.tasks) != 2:
        raise SpecError("usage: python -m bench data export-images --task T [--format png|jpeg] DIR|s3://BUCKET/PREFIX")
    target = args.tasks[1]
    remote = target.startswith("s3://")
    if remote and s3.holds_objects(target):
        raise SpecError(f"{target} already holds objects: export under a new prefix")
    if not remote and Path(target).exists() and any(Path(target).iterdir()):
        raise SpecError(f"{target} is not empty: export into a new folder")
    task = get_task(args.task, data_dir=args.data_dir)
    folder = data.prepare(task)
    if folder is None:
        raise SpecError(f"task {task.name} is synthetic: it has no images to export")
    with tempfile.TemporaryDirectory(prefix="dtbench-export-") as scratch:
        written = imagefolder.export(data.load(folder), Path(scratch) if remote else Path(target), args.format)
        if remote:
            s3.upload(Path(scratch), target)
    log.info("wrote %s images to %s/train and %s to %s/test (%s): read them back with %s", f"{written['train']:,}",
             target, f"{written['test']:,}", target, args.format,
             f"--input s3 --data-url {target}" if remote else f"--dataset imagefolder --data-dir {target}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from bench.worker import data

    if args.tasks[:1] == ["export-images"]:
        return export_images(args)

    if args.download:
        log.info("downloaded to %s", data.download_fashion_mnist())
    elif args.install and not data.install_fashion_mnist():
        log.warning("could not install Debian's dataset-fashion-mnist (needs apt-get and root or sudo): "
                    "the default task will need --data-dir or `python -m bench data --download`")
    failed = 0
    for name in args.tasks:
        try:
            folder = data.prepare(get_task(name, data_dir=args.data_dir))
        except SpecError as exc:  # one missing dataset must not stop the others
            log.warning("task %s: %s", name, exc)
            failed += 1
            continue
        log.info("task %s: %s", name, folder or "synthetic (made on the device, nothing cached)")
    return 2 if failed and not args.install else 0


def cmd_regress(args: argparse.Namespace) -> int:
    from bench.regress import calibrate, compare, duets

    out: Path = args.out
    run_args = [["--variant", v.strip(), "--devices", str(args.devices), "--task", args.task, *args.run_args.split()]
                for v in args.variants.split(",")]
    if args.calibrate:
        summary = calibrate.calibrate(run_args, args.groups, args.repeats, args.threshold, args.alpha, out)
        print(f"A/A false alarms: {summary['false_alarm_rate']:.0%} of {args.groups}; "
              f"detected: 10% slowdown {summary['detected_10pct']:.0%}, 20% slowdown {summary['detected_20pct']:.0%} "
              f"({args.repeats} duets a comparison). Noise: throughput of runs varies {summary['run_to_run_cv']:.1%} "
              f"(CV) from run to run, a duet's paired ratio {summary['duet_ratio_sd']:.1%} (sd)")
        return 0
    if args.against:
        baseline, current, paired = duets.against(args.against, run_args, args.repeats, out)
    elif args.baseline and args.current:
        baseline, current, paired = Path(args.baseline), Path(args.current), args.duets
    else:
        raise SpecError("say what to compare: --against REV, or --baseline OLD.jsonl --current NEW.jsonl")
    # Runs of one --against are partners by construction; stored files must show that they are.
    code, text = compare.judge(baseline, current, paired, args.threshold, args.alpha, args.accuracy_tolerance, out,
                               check_pairs=not args.against)
    print(text)
    return code


def cmd_overhead(args: argparse.Namespace) -> int:
    from bench.run import overhead

    return overhead.main(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="variants, tasks and the devices found").set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="one run: one row appended to OUT/results.jsonl")
    p.add_argument("--variant", required=True, help=f"one of {', '.join(VARIANTS)}")
    p.add_argument("--devices", type=int, default=1, help="device slots in all (world size)")
    p.add_argument("--nodes", "--nnodes", type=int, default=1,
                   help="nodes the devices are split over (fake nodes on this host unless --node-rank is given)")
    p.add_argument("--node-rank", type=int, help="real multi-host: run only this node's share here")
    p.add_argument("--master-addr", default="127.0.0.1", help="real multi-host: node 0's address")
    p.add_argument("--master-port", type=int, help="real multi-host: a port free on node 0 (the same on every host)")
    p.add_argument("--resume-from", type=Path, metavar="RUN_DIR",
                   help="continue that run (OUT/runs/ID, run with --checkpoint-every-epoch) from its last checkpoint")
    p.add_argument("--independent", action="store_true",
                   help="gradient synchronisation off (torch-ddp, accelerate): the no-communication bound")
    _add_engine_options(p, several=False)
    _add_task_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("sweep", help="variants x device counts 1, 2, 4 ... N, then a table and report.md")
    p.add_argument("--variants", default="all", help="comma-separated variant names (default all)")
    p.add_argument("--max-devices", type=int, default=2, help="largest device count (default 2)")
    p.add_argument("--nodes", type=int, default=1, help="fake nodes (default 1)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run the whole sweep R times, round-robin; the report folds repeats (default 1)")
    p.add_argument("--resume", action="store_true",
                   help="run only what --out lacks: configurations without a finished row of this revision and task")
    p.add_argument("--allow-mixed-revisions", action="store_true",
                   help="--resume over rows another code revision wrote (their runs count as done)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the whole plan and run nothing: every run's processes, commands, GPUs, cores, "
                        "rendezvous, TF_CONFIG and Accelerate config, and an estimate from --out's earlier rows")
    p.add_argument("--assume-gpus", type=int, metavar="N",
                   help="with --dry-run: plan for a box with N GPUs (this machine's cores)")
    p.add_argument("--no-analysis", dest="analysis", action="store_false",
                   help="skip the scaling analysis: single-device baselines, independent (no-sync) runs, "
                        "the all-reduce microbenchmark")
    _add_engine_options(p, several=True)
    _add_task_options(p)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("maxbatch", help="the largest global batch a variant trains on N devices: probes until "
                                        "out of memory, then bisects (out of memory caught and recorded)")
    p.add_argument("--variant", required=True, help=f"one of {', '.join(VARIANTS)}")
    p.add_argument("--devices", type=int, default=1, help="device slots in all (world size)")
    p.add_argument("--nodes", type=int, default=1, help="fake nodes the devices are split over (default 1)")
    p.add_argument("--memory-limit", type=float, metavar="MIB",
                   help="each rank's memory in MiB (RLIMIT_DATA): required on a CPU (on GPUs the device's "
                        "memory is the limit)")
    p.add_argument("--max-batch", type=int, default=65536, help="stop doubling here (default 65536)")
    p.add_argument("--resolution", type=int, default=1,
                   help="stop bisecting when what fits and what does not are this many samples a device apart "
                        "(default 1: exact)")
    _add_task_options(p)
    p.set_defaults(func=cmd_maxbatch)

    p = sub.add_parser("peak", help="the device's measured peak: large matmuls per precision on one device slot")
    p.add_argument("--device-type", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--cores-per-slot", type=int, default=1, help="CPU cores of the slot (default 1)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (default results/latest)")
    p.set_defaults(func=cmd_peak)

    p = sub.add_parser("report", help="report.md and results.csv from a results directory")
    p.add_argument("dir", type=Path, nargs="?", default=DEFAULT_OUT)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("data", help="prepare the tasks' datasets into the cache; `data export-images --task T DIR` "
                                    "writes one as an image folder (DIR/train/<class>/*, DIR/test/<class>/*)")
    p.add_argument("tasks", nargs="*", default=["quick", "default"])
    p.add_argument("--task", default="default", help="export-images: the task whose dataset to write")
    p.add_argument("--format", choices=("png", "jpeg"), default="png", help="export-images: png (lossless, "
                                                                            "default) or jpeg")
    p.add_argument("--install", action="store_true", help="install Debian's dataset-fashion-mnist if missing")
    p.add_argument("--download", action="store_true", help="opt-in: download Fashion-MNIST (needs internet)")
    p.add_argument("--data-dir")
    p.set_defaults(func=cmd_data)

    p = sub.add_parser("regress", help="did a change slow training down? A/B against a revision, or two files")
    p.add_argument("--against", metavar="REV", help="A/B on this machine: REV (baseline) vs the current tree")
    p.add_argument("--baseline", metavar="OLD.jsonl", help="a stored results file (or directory)")
    p.add_argument("--current", metavar="NEW.jsonl", help="the results file to judge against it")
    p.add_argument("--duets", action="store_true",
                   help="with --baseline/--current: judge the files' runs as duets (the baseline/ and current/ "
                        "folders an earlier --against wrote), e.g. again with another threshold")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the check itself: A/A false alarms, detection of injected slowdowns")
    p.add_argument("--variants", default="torch-ddp", help="runs to compare (default torch-ddp)")
    p.add_argument("--devices", type=int, default=1)
    p.add_argument("--task", default="quick")
    # 400 timed steps (~0.7 s) a run: with 80 (~0.14 s) one short hiccup of the machine moved a
    # run's median, and run-to-run noise was 14-16 % instead of ~4 %.
    p.add_argument("--run-args", default="--epochs 20 --windows 100",
                   help="more `bench run` options for every run (default: longer timing on the quick task)")
    p.add_argument("--repeats", type=int, default=5,
                   help="duets: runs a side, each taking turns with one of the other side (default 5)")
    p.add_argument("--groups", type=int, default=10, help="A/A comparisons for --calibrate (default 10)")
    p.add_argument("--threshold", type=float, default=0.05, help="smallest change that counts (default 0.05)")
    p.add_argument("--alpha", type=float, default=0.01,
                   help="significance level (default 0.01: a false alarm costs a CI run and trust)")
    p.add_argument("--accuracy-tolerance", type=float, default=0.01, help="absolute accuracy drop allowed")
    p.add_argument("--out", type=Path, default=Path("results/latest/regress"))
    p.set_defaults(func=cmd_regress)

    p = sub.add_parser("overhead", help="harness torch-ddp (1 device) vs a plain loop, interleaved A/B")
    p.add_argument("--task", default="default")
    p.add_argument("--repeats", type=int, default=3, help="A/B pairs (default 3)")
    p.add_argument("--out", type=Path, default=Path("results/latest/overhead"))
    p.set_defaults(func=cmd_overhead)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "data" and not any(e.startswith("-") for e in extra):
        args.tasks += extra  # `data export-images --task T DIR`: DIR after the options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    for chatty in ("botocore", "boto3", "s3transfer", "urllib3"):  # where they found credentials, each call
        logging.getLogger(chatty).setLevel(logging.WARNING)
    stop_on_signals()
    try:
        return args.func(args)
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StoreError as exc:  # the run's row, printed: nothing measured is lost
        print(f"error: {exc}\n{exc.line}", file=sys.stderr)
        return 1
    except Interrupted as stop:
        if stop.rows and getattr(args, "out", None):
            _print_table(stop.rows, args.out)
        resume = " (`bench sweep --resume` runs what is left)" if args.func is cmd_sweep else ""
        in_flight = ", the run in flight killed and recorded as interrupted" if stop.run_id else ""
        print(f"\n{stop}: {sum(r.status != 'interrupted' for r in stop.rows)} runs finished{in_flight}{resume}",
              file=sys.stderr)
        return stop.exit_code


if __name__ == "__main__":
    sys.exit(main())
