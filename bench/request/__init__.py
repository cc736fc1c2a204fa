"""What a command line asks for (its frozen `Request`, checked once), expanded into the harness's terms: the task
(with its dataset's shape and the input pipelines named), the device type, the engines, the machine a sweep plans
for, the settings each of its runs takes."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.spec import devices, models
from bench.spec import task as task_flags
from bench.spec.task import (CPU_IMAGE_SIZE, DATA_URL_WITHOUT_S3, DATASET_SHAPES, DEFAULT_TASK, FILE_INPUTS, INPUTS,
                             WORKERS_WITHOUT_FILES, SpecError, TaskSpec, check_choice, get_task)
from bench.request.command import Request
from bench.request.layout import dataclass_layers
from bench.request.settings import Engines
from bench.run.runspec import RunSpec
from bench.spec.setting import declared


def input_modes(args: Request) -> list[dict]:
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
        check_choice("input", name, INPUTS)
    if any(workers) and not any(i in FILE_INPUTS for i in inputs):
        raise SpecError(WORKERS_WITHOUT_FILES)
    if args.data_url and "s3" not in inputs:
        raise SpecError(DATA_URL_WITHOUT_S3)
    pairs = list(dict.fromkeys((i, w) for i in inputs for w in (workers if i in FILE_INPUTS else [0])))
    if args.command != "sweep" and len(pairs) != 1:
        raise SpecError("bench run takes one --input and one --loader-workers: use bench sweep to compare several")
    return [{"input": i, "loader_workers": w, "data_url": args.data_url if i == "s3" else None} for i, w in pairs]


# The GPU default's batch per device on an 80 GB card (ResNet-50 at 224 px in bf16 uses about a third of it);
# a smaller card gets it halved until its share of 80 GB covers it, never fewer than 32. Cards sold as 80 GB report
# 79.6-80 GiB (an H100's 81,559 MiB): 5 % of slack keeps them, and 40/48 GB ones, at their batch.
GPU_BATCH, GPU_BATCH_MEMORY_GIB, GPU_BATCH_FLOOR, NOMINAL_SLACK = 256, 80, 32, 0.95
# A GPU of unknown memory (a --dry-run's assumed box) is planned as an H100's 80 GB.
ASSUMED_GPU_MEMORY_MIB = 81_559


def gpu_batch(memory_mib: int | None) -> int:
    """The default GPU task's batch per device for a GPU of `memory_mib` (None: an assumed 80 GB card)."""
    gib = (memory_mib or ASSUMED_GPU_MEMORY_MIB) / 1024
    batch = GPU_BATCH
    while batch > GPU_BATCH_FLOOR and gib < GPU_BATCH_MEMORY_GIB * batch / GPU_BATCH * NOMINAL_SLACK:
        batch //= 2
    return batch


def task_name(args: Request, device_type: str) -> str:
    """--task, else the device's default (the small CNN on a CPU, ResNet-50 on GPUs)."""
    return args.task or DEFAULT_TASK[device_type]


def task_from(args: Request, device_type: str, machine: devices.Machine | None = None) -> TaskSpec:
    """The task of the command line. `machine` sizes the GPU default's batch to its GPUs' memory (this machine's
    when not given)."""
    # GPUs train in bf16 unless told otherwise; CPUs keep the task's own precision (fp32).
    precision = args.precision or ("bf16" if device_type == "cuda" else None)
    # A run's --compile trains compiled; a sweep's runs every configuration eager and compiled.
    compiled = args.compile if args.command != "sweep" else None
    # A sweep scales weak unless told (the field's convention), one run strong (its global batch as given).
    scaling = args.scaling or ("weak" if args.command == "sweep" else "strong")
    [first_mode, *more_modes] = input_modes(args)
    data_dir = args.data_dir and str(Path(args.data_dir).resolve())  # the ranks start in the repository
    model = f"{models.OWN}:{args.model_module}" if args.model_module else args.model
    name = task_name(args, device_type)
    global_batch = args.global_batch
    if name == DEFAULT_TASK["cuda"] and global_batch is None and args.per_device_batch is None:
        machine = machine or devices.discover()
        global_batch = gpu_batch(min(machine.gpu_memory_mib) if machine.gpu_memory_mib else None)
    # Every flag given, by its setting's name (bench.spec.task.given); those set here stand as computed above, and
    # the size and channels are applied once the dataset's shape is known (below).
    task = get_task(name, **{**task_flags.given(args), "global_batch": global_batch, "precision": precision,
                             "compile": compiled, **first_mode, "data_dir": data_dir, "scaling": scaling,
                             "model": model, "image_size": None, "channels": None})
    for mode in more_modes:
        task.replace(**mode).validate()
    if task.data.dataset == "imagefolder":  # classes, channels and size come from the folder
        from bench.worker import imagefolder

        task = imagefolder.describe(task, args.image_size)
    elif args.val_split:
        raise SpecError("--val-split goes with --dataset imagefolder --data-dir DIR")
    elif args.dataset in DATASET_SHAPES:  # another bundled dataset: its own image size, channels and classes
        side, channels, classes = DATASET_SHAPES[args.dataset]
        task = task.replace(image_size=side, channels=channels, classes=classes)
    # A model that needs another size or 3 channels: the bundled datasets resized on the device, files as decoded.
    # The seeds' large models train at a small size on a CPU unless told.
    image_size = args.image_size or (CPU_IMAGE_SIZE.get(task.name) if device_type == "cpu" else None)
    task = task.replace(**{k: v for k, v in (("image_size", image_size), ("channels", args.channels)) if v})
    task.validate()
    for mode in [first_mode, *more_modes]:
        if mode["input"] == "s3":  # the bucket reachable, readable and holding this task's images
            from bench.worker import data

            data.check_remote(task.replace(**mode))
            break
    return task


def device_type(args: Request, machine: devices.Machine) -> str:
    return machine.default_device_type if args.device_type == "auto" else args.device_type


def engines(args: Request) -> list[tuple[str, str | None]]:
    """(engine, the cluster address given for it) for every engine named."""
    addresses = {"ray": args.ray_address, "spark": args.spark_master, "dask": args.dask_scheduler}
    return [(engine, addresses.get(engine)) for engine in Engines(engine=args.engine).names()]


def sweep_machine(args: Request) -> devices.Machine:
    """This machine, or with --assume-gpus the GPU box a --dry-run plans for."""
    machine = devices.discover()
    if args.assume_gpus is None:
        return machine
    from bench.sweep import preview

    return preview.assumed_machine(args.assume_gpus, machine.cores)


# What a command's plan decides of each run (one run's too: bench.commands.common.one_run), not a setting's.
PLANNED = {"variant", "task", "device_type", "nodes", "devices_per_node", "engine", "engine_address", "interface"}
# RunSpec's fields a settings layer sets by the field's own name.
RUN_SETTINGS = {f.name for f in dataclasses.fields(RunSpec)} - PLANNED


def run_settings(args: Request) -> dict:
    """What the command's settings set on each of its runs: every setting it takes whose field is named as one of
    RunSpec's (--malloc: malloc, --timeout: timeout_s). A path is made absolute: the ranks start in the repository."""
    values = {s.dest: getattr(args, s.dest) for cls in dataclass_layers(args.command) for s in declared(cls)
              if s.dest in RUN_SETTINGS and s.takes(args.command)}
    return {name: value.resolve() if isinstance(value, Path) else value for name, value in values.items()}
