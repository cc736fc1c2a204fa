"""What each `python -m bench` command does once its options are parsed (bench.cli): build the runs, call the
harness, print where the results went."""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bench import command, metrics
from bench.sweep import plan
from bench.run.runspec import RunSpec
from bench.spec import devices, knobs, models, options
from bench.run import model_check
from bench import request
from bench.spec import frameworks
from bench.spec.task import CPU_IMAGE_SIZE, PRESETS, SpecError, TaskSpec, get_task
from bench.spec.variants import VARIANTS, default_variants, get_variant
from bench.status import Status

if TYPE_CHECKING:
    from bench.analysis.folder import Folder

log = logging.getLogger("bench")


def cmd_list(args: argparse.Namespace) -> int:
    machine = devices.discover()
    print("variants:")
    for v in VARIANTS.values():
        where = f"cpu ({v.cpu_max_per_node}/node), cuda" if v.cpu_max_per_node else "cpu, cuda"
        missing = f"  [not installed: {v.not_installed().partition(': ')[2]}]" if v.not_installed() else ""
        print(f"  {v.name:16} {where:20} launcher={v.launcher:9} {v.summary}{missing}")
    print("tasks:")
    for t in PRESETS.values():
        on_cpu = f" ({CPU_IMAGE_SIZE[t.name]}px on a CPU)" if t.name in CPU_IMAGE_SIZE else ""
        print(f"  {t.name:16} {t.model.name:16} on {t.data.dataset:14} {t.model.image_size}px{on_cpu} "
              f"batch={t.recipe.global_batch} epochs={t.recipe.epochs} {t.recipe.optimizer} {t.recipe.precision}")
    print("models (--model): built in to both frameworks:", ", ".join(models.BUILT_IN))
    print("  named once, timm's for PyTorch and keras.applications' for TensorFlow:", ", ".join(models.PAIRED))
    print("  any other as timm:NAME, torchvision:NAME, keras:NAME, or your own with --model-module PKG.MODULE:FN")
    print("knobs (bench run --set NAME=VALUE): the framework's default, then the values worth trying")
    for name, k in [(v.name, k) for v in VARIANTS.values() for k in knobs.declared(v.knobs)] + [
            ("every approach", k) for k in knobs.COMMON]:
        tries = ", ".join(k.text(t) for t in k.tries)
        changes = "  [changes the arithmetic]" if k.changes_arithmetic else ""
        print(f"  {name:16} {k.name:30} {k.text(k.default)} | {tries}{changes}  {k.help}")
    print("devices:")
    print(f"  cpu: {len(machine.cores)} cores available ({', '.join(map(str, machine.cores))})")
    if machine.gpus:
        for gid, name in zip(machine.gpus, machine.gpu_names):
            print(f"  cuda:{gid} {name}")
    else:
        print("  cuda: none found")
    return 0


def print_table(rows, results: Folder) -> None:
    """The report's lines (the whole folder folded, as report.md) for the configurations just run."""
    from bench.analysis.tables import text_table

    configs = results.configs
    ran = {r.key for r in rows}
    print(text_table(configs[[key in ran for key in configs["key"]]].reset_index(drop=True)))


def conclude(out: Path, rows, args: argparse.Namespace):
    """A command's runs done: the folder folded once (returned for the table, the report and the verdict), its
    CSV and Parquet written, and (--mlflow) the MLflow runs of `rows` given the figures derived from the folder."""
    from bench.analysis.folder import Folder
    from bench.results import ResultStore

    results = Folder.read(out, metrics.settings(args))
    ResultStore(out).export_tables(results.runs)
    if getattr(args, "mlflow", None):
        from bench.sweep import tracking

        tracking.log_derived(args.mlflow, rows, results.configs)
    return results


def finish_stopped(rows, args: argparse.Namespace) -> None:
    """A command stopped by a signal: the runs that finished, concluded as any command's, and their table."""
    print_table(rows, conclude(args.out / "maxbatch" if args.command == "maxbatch" else args.out, rows, args))


def cmd_run(args: argparse.Namespace) -> int:
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    spec = one_run(args, device_type, "run", host_node=args.node_rank, master_addr=args.master_addr,
                   master_port=args.master_port, independent=args.independent,
                   resume_from=args.resume_from and args.resume_from.resolve(), profile=args.profile,
                   malloc=args.malloc, as_shipped=args.as_shipped, sample_every_s=args.sample_every)
    variant, task = spec.variant, spec.task
    engines = request.engines(args)
    if len(engines) != 1:
        raise SpecError("bench run takes one --engine: use bench sweep to compare several")
    [(engine, address)] = engines
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

    if args.node_rank not in (None, 0):  # a node agent of a multi-host run: node 0's host keeps the row
        row = execute(spec, args.out, machine, data.prepare(task))
        print(f"node {args.node_rank}: {row.status}" + (f": {row.error}" if row.error else ""))
        return 0 if row.status == Status.OK else 1
    rows = runner.run_all([spec], args.out, machine, args.mlflow)
    print_table(rows, conclude(args.out, rows, args))
    return 0 if rows[0].status == Status.OK else 1


def chosen_interface(args: argparse.Namespace):
    """A real multi-host run's interface on this host: --ifname's, or the one the route to the master leaves by."""
    if args.ifname and args.node_rank is None:
        raise SpecError("--ifname names a real multi-host run's interface: give --node-rank too, or drop it")
    if args.node_rank is None or args.master_port is None:
        return None
    from bench.hosts import interface

    return interface.named(args.ifname) if args.ifname else interface.toward(args.master_addr, args.master_port)


def one_run(args: argparse.Namespace, device_type: str, command: str, **spec_fields) -> RunSpec:
    """The one run `bench run` and `bench maxbatch` ask for, checked the same way for both: the topology, one
    value of each approach option, the task, and that the variant runs there."""
    variant = get_variant(args.variant)
    devices.check_topology(args.devices, args.nodes)
    shardings = options.modes(variant, options.given(args), sweep=False)
    if len(shardings) != 1:
        raise SpecError(f"bench {command} takes one value of each approach option: use bench sweep to compare several")
    task = request.task_from(args, device_type).replace(**shardings[0])
    if getattr(args, "set", None):
        settable = knobs.settable(variant.knobs)
        setting = knobs.canonical(settable, args.set, variant.name)
        if why := knobs.misfit(settable, setting, task.for_world(args.devices)):  # the recipe's batch: unscaled
            raise SpecError(why)
        task = task.with_knobs(setting)
    task.validate()
    spec = RunSpec(variant, task.for_world(args.devices), device_type, args.nodes, args.devices // args.nodes,
                   args.cores_per_slot, args.timeout, **spec_fields)
    if reason := spec.inapplicable():  # a library's model of the other framework among them, before it is built
        raise SpecError(f"{reason}: choose another variant or fewer devices")
    # Your own module's framework is known once it is built: what it returns.
    if refused := models.refusal(task.model.name, model_check.check(task, [variant]), variant):
        raise SpecError(f"{refused}: choose an approach of its framework (bench list)")
    return spec


def cmd_maxbatch(args: argparse.Namespace) -> int:
    """The largest global batch the variant trains on --devices (bench.studies.maxbatch); probes under OUT/maxbatch."""
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    get_variant(args.variant)  # an unknown name first, before the search's own checks
    if args.max_batch < args.devices:
        raise SpecError(f"--max-batch {args.max_batch} is below one sample a device: give at least {args.devices}")
    if args.device_memory_gib is None and device_type == "cpu":
        raise SpecError("on a CPU the search needs a memory to fill: pass --device-memory GIB (each rank's), "
                        "e.g. --device-memory 3")
    spec = one_run(args, device_type, "maxbatch")
    from bench.studies import maxbatch
    from bench.sweep import runner

    out = args.out / "maxbatch"
    if args.resolution < 1:
        raise SpecError(f"--resolution {args.resolution}: at least 1 sample a device")
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


def _approaches_for(task: TaskSpec, variants: list, refuse: bool) -> list:
    """The variants that can train the task's model (a library's or your own is built once here to know its
    framework); with `refuse`, a named variant that cannot is the request's one-line error instead."""
    framework = model_check.check(task, variants)
    if refuse and (refused := next(filter(None, (models.refusal(task.model.name, framework, v) for v in variants)), None)):
        raise SpecError(f"{refused}: name approaches of its framework, or drop --variants")
    return [v for v in variants if models.refusal(task.model.name, framework, v) is None]


def cmd_sweep(args: argparse.Namespace) -> int:
    machine = request.sweep_machine(args)
    device_type = request.device_type(args, machine)
    if args.repeats < 1:
        raise SpecError(f"repeats must be at least 1 (got {args.repeats})")
    if args.models and (args.model or args.model_module):
        raise SpecError("--models names every model of the sweep: drop --model / --model-module")
    if (asked := opt_ins(args)) and not args.tune:
        raise SpecError(f"{' '.join(asked)} goes with --tune MINUTES: raced with each approach's knobs")
    tasks = [request.task_from(argparse.Namespace(**{**vars(args), "model": name.strip()}), device_type, machine)
             for name in (args.models or "").split(",") if name.strip()] or [request.task_from(args, device_type, machine)]
    named_variants = args.variants not in ("all", "")
    if not named_variants:
        # The single-device baselines belong to the scaling analysis.
        variants = [v for v in default_variants() if args.analysis or v.max_devices is None]
    else:
        variants = [get_variant(n.strip()) for n in args.variants.split(",")]
    counts = plan.given_counts(args.devices) if args.devices else plan.device_counts(args.max_devices)
    named = options.given(args)
    options.refuse_untaken(named, variants)
    specs = []
    for task in tasks:  # round-robin over the models too, when repeated
        trains = _approaches_for(task, variants, refuse=named_variants and len(tasks) == 1)
        specs += plan.plan(trains, task, device_type, counts, args.nodes, engines=request.engines(args),
                           variants_named=named_variants, cores_per_slot=args.cores_per_slot, timeout_s=args.timeout,
                           analysis=args.analysis, compiled=args.compile, inputs=request.input_modes(args),
                           shardings={v.name: options.modes(v, named, sweep=True) for v in trains})
    task = tasks[0]
    specs = [dataclasses.replace(spec, malloc=args.malloc, sample_every_s=args.sample_every, as_shipped=args.as_shipped,
                                 profile=args.profile and spec.variant.profiles) for spec in specs]
    specs, first = plan.answer_first(specs)
    most = max((s.world_size for s in specs), default=1)
    specs = plan.rounds(specs, args.repeats)
    plan.check_all(specs, machine)  # before the harness's heavy imports: a bad request answers at once
    from bench.analysis import report
    from bench.sweep import forecast, resume, runner
    from bench.studies import audit, microbench

    check_resume(args)
    if args.tune is not None and not args.tune > 0:
        raise SpecError(f"--tune {args.tune:g}: give the tuning's minutes above 0, e.g. --tune 30")
    planned = specs
    if args.resume:
        specs = resume.remaining(planned, args.out, args.allow_mixed_revisions)
        print(f"resuming {args.out}: {len(planned) - len(specs)} of {len(planned)} planned runs are there, "
              f"{len(specs)} left")
    if args.dry_run:
        from bench.sweep import preview

        print(preview.render(preview.build(specs, machine, args.out), machine, args.assume_gpus is not None,
                             args.out, args.analysis))
        return 0
    families = {s.variant.family for s in specs}
    audit_runs = (audit.pending_runs(machine, device_type, task, families, args.cores_per_slot)
                  if args.analysis else [])
    print(forecast.up_front(specs, audit_runs, args.out))
    if args.analysis:  # first, so that every row gets its fraction of the measured peak
        microbench.peak_for_sweep(args.out, machine, device_type, args.cores_per_slot, again=not args.resume)
        audit.audit(args.out, machine, device_type, task, families, args.cores_per_slot)
    lead = min(first, len(list(itertools.takewhile(lambda s: plan.first_answer(s, most), specs))))  # one round's

    def provisional(done: int) -> None:
        if done == lead < len(specs):
            print_provisional(args.out, metrics.settings(args), done, specs[done:])

    rows = runner.run_all(specs, args.out, machine, args.mlflow, after_run=provisional)
    if args.analysis:
        microbench.communication_for_sweep(rows, args.out, machine, again=not args.resume)
    if args.tune:
        from bench.sweep import tune

        try:
            tune.tune_and_say(tune.tunable(planned, most), args.out, machine, args.tune, max(3, args.repeats),
                              args.resume, args.allow_mixed_revisions, others=planned, opt_ins=opt_ins(args))
        except tune.BudgetTooSmall as exc:
            print(exc)  # the sweep's own runs are reported all the same
    results = conclude(args.out, rows, args)  # the folder as it ends, folded once for all below
    print_table(rows, results)
    path = report.write_report(results)
    print(f"\nrows appended to {args.out / 'results.jsonl'} (+ results.csv, results.parquet); report in {path} "
          f"and {path.with_suffix('.html')}")
    print_verdict(results)
    # An approach that does not fit the device memory is an answer of the sweep, not a fault of it.
    return 0 if all(r.status in (Status.OK, Status.SKIPPED, Status.DOES_NOT_FIT) for r in rows) else 1


def check_resume(args: argparse.Namespace) -> None:
    """`bench sweep` and `bench tune` take --allow-mixed-revisions only with --resume."""
    if args.allow_mixed_revisions and not args.resume:
        raise SpecError("--allow-mixed-revisions goes with --resume")


def opt_ins(args: argparse.Namespace) -> tuple[str, ...]:
    """The flags given of the knobs a tuning races only when asked (--tune-batch, --tune-compile)."""
    return tuple(k.opt_in for k in knobs.COMMON if k.opt_in and getattr(args, k.opt_in[2:].replace("-", "_")))


def cmd_tune(args: argparse.Namespace) -> int:
    """Each approach's own knobs raced within --budget, its best and its defaults confirmed (bench.sweep.tune)."""
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    check_resume(args)
    if not args.budget > 0 or args.repeats < 1:
        raise SpecError(f"--budget {args.budget:g} --repeats {args.repeats}: give minutes above 0 and at least one "
                        "repeat, e.g. --budget 30 --repeats 3")
    specs = []
    for name in [n.strip() for n in args.variants.split(",") if n.strip()]:
        variant = get_variant(name)
        if not knobs.declared(variant.knobs):
            raise SpecError(f"{name} has no knobs to tune: choose among "
                            f"{', '.join(v.name for v in VARIANTS.values() if v.knobs)}")
        # An approach option (--zero-stage) goes to the approaches that take it.
        mine = {o.field for o in options.options_of(variant)}
        own = {field: None for field in options.every_option() if field not in mine}
        spec = one_run(argparse.Namespace(**{**vars(args), "variant": name, **own}), device_type, "tune")
        try:  # every run refused before the first starts, not once the tuning reaches it
            spec.check(machine)
        except SpecError as exc:
            raise SpecError(f"{name}: {exc}: tune it apart, or leave the option out") from None
        specs.append(dataclasses.replace(spec, malloc=args.malloc))
    from bench.analysis import report
    from bench.sweep import tune

    tune.tune_and_say(specs, args.out, machine, args.budget, args.repeats, args.resume, args.allow_mixed_revisions,
                      opt_ins=opt_ins(args))
    results = conclude(args.out, [], args)
    path = report.write_report(results)
    print(f"report in {path}; the short runs of the search in {args.out / tune.SEARCH} (never ranked)")
    print_verdict(results)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    import json

    from bench.results.schema import row_schema

    print(json.dumps(row_schema(), indent=1))
    return 0


def cmd_peak(args: argparse.Namespace) -> int:
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


def cmd_collectives(args: argparse.Namespace) -> int:
    """All-reduce, all-gather and reduce-scatter on one topology, as the sweep measures them, and their α–β fits:
    across real hosts (--node-rank on each), the link between nodes that `bench project --between-nodes` reads."""
    from bench.results import collectives
    from bench.studies import microbench

    if args.devices < 2:
        raise SpecError(f"--devices {args.devices}: a collective needs at least 2 ranks")
    devices.check_topology(args.devices, args.nodes)
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    interface = chosen_interface(args)
    across = ({} if args.node_rank is None else
              dict(host_node=args.node_rank, master_addr=args.master_addr, master_port=args.master_port,
                   interface=interface))
    measured = microbench.measure_collectives(args.out, machine, device_type, args.nodes, args.devices // args.nodes,
                                              timeout_s=args.timeout, **across)
    if args.node_rank not in (None, 0):
        print(f"node {args.node_rank}: {'failed: see ' + str(args.out / 'runs') if measured is None else 'ok'}")
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


def cmd_report(args: argparse.Namespace) -> int:
    from bench.analysis import report
    from bench.analysis.folder import Folder

    results = Folder.read(args.dir, metrics.settings(args))
    if not results.rows:
        raise SpecError(f"{args.dir} holds no rows ({args.dir / 'results.jsonl'} is missing, empty or torn): name the "
                        "folder a sweep wrote, or run `bench sweep --out DIR` first")
    path = report.write_report(results)
    print(path.read_text())
    print_verdict(results)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Several machines' results folders side by side (bench.analysis.compare): compare.md and compare.html."""
    folders = [Path(d) for d in args.dirs]
    if len(folders) < 2:
        raise SpecError(f"{command()} compare needs two or more results folders, one per machine: e.g. {command()} "
                        "compare results/reference-cpu results/reference-h100-default")
    twice = [str(d) for d in folders if sum(d.resolve() == other.resolve() for other in folders) > 1]
    if twice:
        raise SpecError(f"{twice[0]} is given more than once: name each machine's folder once")
    if args.prices and len(args.prices) != len(folders):
        raise SpecError(f"--price-per-device-hour has {len(args.prices)} prices for {len(folders)} folders: give "
                        "one per folder, in the folders' order")
    from bench.analysis import compare

    path = compare.write(folders, args.out, args.prices)
    print(path.read_text())
    print(f"written to {path} and {path.with_suffix('.html')}")
    return 0


def cmd_project(args: argparse.Namespace) -> int:
    """`bench project DIR`: the projected table (bench.analysis.project) and DIR/projection.png."""
    if (args.alpha_us is None) != (args.busbw_gbps is None):
        raise SpecError("give the link between nodes whole: --alpha-us US and --busbw-gbps GB/S together")
    if (args.alpha_us is not None and args.alpha_us < 0) or (args.busbw_gbps is not None and args.busbw_gbps <= 0):
        raise SpecError("--alpha-us must be 0 or more and --busbw-gbps more than 0")
    if args.devices_per_node is not None and args.devices_per_node < 1:
        raise SpecError(f"--devices-per-node must be at least 1 (got {args.devices_per_node})")
    from bench.analysis import networks, project
    from bench.analysis.folder import Folder
    from bench.analysis.projection import Link

    if sum(x is not None for x in (args.between_nodes, args.busbw_gbps, args.network)) > 1:
        raise SpecError("name the link between nodes once: --network NAME, --between-nodes DIR or "
                        "--alpha-us/--busbw-gbps")
    inside = networks.named(args.within_node, networks.WITHIN_NODE, "--within-node") if args.within_node else None
    if args.network:
        preset = networks.named(args.network, networks.BETWEEN_NODES, "--network")
        far, far_source, far_name = preset.links(), preset.source, preset.name
    elif args.between_nodes:
        far, far_source = project.between_nodes(args.between_nodes), f"measured in {args.between_nodes}"
        far_name = f"measured in {args.between_nodes.name}"
    elif args.busbw_gbps:
        far, far_source = Link(args.alpha_us * 1e-6, args.busbw_gbps * 1e9), "given"
        far_name = "given"
    else:
        far, far_source, far_name = None, "given", "given"
    result = project.folder(Folder.read(args.dir), devices_per_node=args.devices_per_node, far=far, check=project.measured_error(),
                            far_source=far_source, far_name=far_name, inside=inside)
    print(project.text(result))
    print(f"\nfigure: {project.figure(result, args.dir / 'projection.png')}")
    return 0


def print_provisional(directory: Path, settings: dict | None, done: int, still: list[RunSpec]) -> None:
    """The headline once each approach has run at the sweep's most devices: marked provisional, with what is
    still to run (baselines, twins, fewer devices, repeats), whose rows the full verdict at the end adds."""
    from bench.analysis import headline
    from bench.analysis.folder import Folder
    from bench.analysis.repeats import measured_runs

    results = Folder.read(directory, settings)
    short = headline.text(headline.headlines(results.configs, measured_runs(results.runs)))
    if not short:
        return
    left = list(dict.fromkeys(f"{s.variant.name}{' (no sync)' if s.independent else ''} on {s.world_size}"
                              for s in still))
    named = ", ".join(left[:6]) + (f" and {len(left) - 6} more" if len(left) > 6 else "")
    print(f"\nprovisional answer, after {done} of {done + len(still)} runs (still to run: {named}; the verdict "
          "at the end reads them all):\n" + "\n".join(f"  {line}" for line in short), flush=True)


def print_verdict(results: Folder) -> None:
    """The answer last on the console, where the eye lands when the command ends: the full verdict, then its
    headline (at most three lines a group)."""
    from bench.analysis import headline, verdict
    from bench.analysis.repeats import measured_runs

    print("\nverdict:\n" + "\n".join(f"  {line}" for line in verdict.verdict_lines(results)))
    short = headline.text(headline.headlines(results.configs, measured_runs(results.runs)))
    if short:
        print("\nanswer:\n" + "\n".join(f"  {line}" for line in short))


def export_images(args: argparse.Namespace) -> int:
    """`bench data export-images --task T [--format png|jpeg] DIR|s3://BUCKET/PREFIX`: the task's dataset as an
    image folder, on disk or uploaded to object storage (the AWS environment names endpoint and credentials)."""
    import tempfile

    from bench.worker import data, imagefolder, s3

    if len(args.tasks) != 2:
        raise SpecError(f"usage: {command()} data export-images --task T [--format png|jpeg] DIR|s3://BUCKET/PREFIX")
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
                    f"the default task will need --data-dir or `{command()} data --download`")
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
    run_args = [["--variant", v.strip(), "--devices", str(args.devices), "--task", args.task, *shlex.split(args.run_args)]
                for v in args.variants.split(",")]
    if args.calibrate:
        summary = calibrate.calibrate(run_args, args.groups, args.repeats, args.threshold, args.alpha, out)
        print(f"A/A false alarms: {summary['false_alarm_rate']:.0%} of {args.groups}; "
              f"detected: 10% slowdown {summary['detected_10pct']:.0%}, 20% slowdown {summary['detected_20pct']:.0%} "
              f"({args.repeats} duets a comparison). Noise: throughput of runs varies {summary['run_to_run_cv']:.1%} "
              f"(CV) from run to run, a duet's paired ratio {summary['duet_ratio_sd']:.1%} (sd)")
        if args.groups * args.repeats < 3:  # too few null duets for a spread
            return 0
        from bench.history import floor

        seen = [f"{fl.metric} {floor.describe(fl)}" for fl in floor.from_calibration(out, args.repeats, args.alpha)]
        print(f"The smallest slowdown {args.repeats} duets see here 80 % of the time: {', '.join(seen)} (the gate "
              f"flags none under --threshold {args.threshold:.0%})")
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
    if args.of == "sampler":
        from bench.studies import sampler_overhead

        return sampler_overhead.main(args)
    from bench.studies import overhead

    machine = devices.discover()
    device_type = request.device_type(args, machine)
    return overhead.main(args, request.task_from(args, device_type, machine), device_type)


def cmd_audit(args: argparse.Namespace) -> int:
    """The fast-path audit alone (bench.studies.audit): each switch of the frameworks asked for, on and off here."""
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    task = request.task_from(args, device_type)
    families = set(frameworks.names()) if args.framework == "both" else {args.framework}
    from bench.spec.variants import FAST_PATH_SWITCHES
    from bench.studies import audit

    if not any(device_type in s.device_types and s.family in families for s in FAST_PATH_SWITCHES):
        raise SpecError(f"no fast-path switch of {args.framework} is audited on {device_type}: see "
                        "FAST_PATH_SWITCHES in bench/spec/variants.py")
    switches = audit.audit(args.out, machine, device_type, task, families, args.cores_per_slot, again=args.again)
    for row in switches:
        print(f"{row['framework']} on {device_type}, {audit.summary_line(row)}")
    print(f"written to {args.out / 'fast_path.jsonl'}")
    return 1 if any(row["errors"] for row in switches) else 0


def cmd_gpu_check(args: argparse.Namespace) -> int:
    from bench.studies import gpu_check

    return gpu_check.main(args)
