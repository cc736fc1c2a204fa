"""The commands of many runs: `bench sweep` (approaches x device counts, then the report) and `bench tune`
(each approach's knobs raced within a budget)."""
from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from bench import metrics
from bench import request
from bench.commands.common import conclude, one_run, print_table, print_verdict
from bench.request import Request
from bench.request.settings import Plan
from bench.run import model_check
from bench.run.runspec import RunSpec
from bench.spec import devices, models, options
from bench.spec.task import SpecError, TaskSpec
from bench.spec.variants import default_variants, get_variant
from bench.status import Status
from bench.sweep import plan


def _approaches_for(task: TaskSpec, variants: list, refuse: bool) -> list:
    """The variants that can train the task's model (a library's or your own is built once here to know its
    framework); with `refuse`, a named variant that cannot is the request's one-line error instead."""
    framework = model_check.check(task, variants)
    if refuse and (refused := next(filter(None, (models.refusal(task.model.name, framework, v) for v in variants)), None)):
        raise SpecError(f"{refused}: name approaches of its framework, or drop --variants")
    return [v for v in variants if models.refusal(task.model.name, framework, v) is None]


def cmd_sweep(args: Request) -> int:
    machine = request.sweep_machine(args)
    device_type = request.device_type(args, machine)
    if args.function:
        return sweep_function(args, machine, device_type)
    tasks = [request.task_from(args.replace(model=name.strip()), device_type, machine)
             for name in (args.models or "").split(",") if name.strip()] or [
        request.task_from(args, device_type, machine)]
    named_variants = args.variants not in ("all", "")
    if not named_variants:
        # The single-device baselines belong to the scaling analysis.
        variants = [v for v in default_variants() if args.analysis or v.max_devices is None]
    else:
        variants = [get_variant(n.strip()) for n in args.variants.split(",")]
    counts = plan.given_counts(args.device_counts) if args.device_counts else plan.device_counts(args.max_devices)
    named = options.given(args)
    options.refuse_untaken(named, variants)
    specs = []
    for task in tasks:  # round-robin over the models too, when repeated
        trains = _approaches_for(task, variants, refuse=named_variants and len(tasks) == 1)
        specs += plan.plan(trains, task, device_type, counts, args.nodes, engines=request.engines(args),
                           variants_named=named_variants, cores_per_slot=args.cores_per_slot, timeout_s=args.timeout_s,
                           analysis=args.analysis, compiled=args.compile, inputs=request.input_modes(args),
                           shardings={v.name: options.modes(v, named, sweep=True) for v in trains})
    task = tasks[0]
    run_settings = request.run_settings(args)
    specs = [dataclasses.replace(spec, **{**run_settings, "profile": args.profile and spec.variant.profiles})
             for spec in specs]
    specs, first = plan.answer_first(specs)
    most = max((s.world_size for s in specs), default=1)
    specs = plan.rounds(specs, args.repeats)
    plan.check_all(specs, machine)  # before the harness's heavy imports: a bad request answers at once
    from bench.report import report
    from bench.sweep import forecast, resume, runner
    from bench.studies import audit, microbench

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
                              args.resume, args.allow_mixed_revisions, others=planned, opt_ins=args.layer(Plan).opt_ins())
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


def sweep_function(args: Request, machine, device_type: str) -> int:
    """`--function MODULE:NAME`: your own function under each engine and device count, then the table, the report
    and the verdict as for the approaches (bench.sweep.function)."""
    from bench.sweep import function

    if args.variants not in ("all", "") or args.models:
        raise SpecError("--function runs your own function: drop --variants and --models")
    fn = function.load(args.function)
    counts = plan.given_counts(args.device_counts) if args.device_counts else plan.device_counts(args.max_devices)
    engines = dict(request.engines(args))  # each engine and its cluster's address (--ray-address...) if given
    specs = function.specs(fn, (), {}, args.out.resolve(), list(engines), counts, args.nodes, device_type,
                           args.timeout_s, addresses=engines, warmup_steps=args.warmup_steps,
                           window_steps=args.window_steps, windows=args.windows)
    specs = plan.rounds(specs, args.repeats)
    plan.check_all(specs, machine)
    from bench.report import report
    from bench.sweep import runner

    rows = runner.run_all(specs, args.out, machine, args.mlflow)
    results = conclude(args.out, rows, args)
    print_table(rows, results)
    path = report.write_report(results)
    print(f"\nrows appended to {args.out / 'results.jsonl'}; report in {path} and {path.with_suffix('.html')}")
    print_verdict(results)
    return 0 if all(r.status == Status.OK for r in rows) else 1


def cmd_tune(args: Request) -> int:
    """Each approach's own knobs raced within --budget, its best and its defaults confirmed (bench.sweep.tune)."""
    machine = devices.discover()
    device_type = request.device_type(args, machine)
    specs = []
    for name in args.layer(Plan).named_variants():
        variant = get_variant(name)
        # An approach option (--zero-stage) goes to the approaches that take it.
        mine = {o.field for o in options.options_of(variant)}
        own = {field: None for field in options.every_option() if field not in mine}
        spec = one_run(args.replace(variant=name, **own), device_type, "tune")
        try:  # every run refused before the first starts, not once the tuning reaches it
            spec.check(machine)
        except SpecError as exc:
            raise SpecError(f"{name}: {exc}: tune it apart, or leave the option out") from None
        specs.append(spec)
    from bench.report import report
    from bench.sweep import tune

    tune.tune_and_say(specs, args.out, machine, args.budget, args.repeats, args.resume, args.allow_mixed_revisions,
                      opt_ins=args.layer(Plan).opt_ins(), pairing=args.pairing)
    results = conclude(args.out, [], args)
    path = report.write_report(results)
    print(f"report in {path}; the short runs of the search in {args.out / tune.SEARCH} (never ranked)")
    print_verdict(results)
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
