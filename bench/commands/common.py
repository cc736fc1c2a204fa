"""What several commands share: one run checked as `bench run` checks it, a finished command's folder concluded,
its table and verdict printed."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bench import metrics
from bench import request
from bench.request import Request
from bench.run import model_check
from bench.run.runspec import RunSpec
from bench.spec import knobs, models, options
from bench.spec.task import SpecError
from bench.spec.variants import get_variant

if TYPE_CHECKING:
    from bench.analysis.folder import Folder


def print_table(rows, results: Folder) -> None:
    """The report's lines (the whole folder folded, as report.md) for the configurations just run."""
    from bench.report.tables import text_table

    configs = results.configs
    ran = {r.key for r in rows}
    print(text_table(configs[[key in ran for key in configs["key"]]].reset_index(drop=True)))


def conclude(out: Path, rows, args: Request):
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


def finish_stopped(rows, args: Request) -> None:
    """A command stopped by a signal: the runs that finished, concluded as any command's, and their table."""
    print_table(rows, conclude(args.out / "maxbatch" if args.command == "maxbatch" else args.out, rows, args))


def chosen_interface(args: Request):
    """A real multi-host run's interface on this host: --ifname's, or the one the route to the master leaves by."""
    if args.host_node is None or args.master_port is None:
        return None
    from bench.hosts import interface

    return interface.named(args.ifname) if args.ifname else interface.toward(args.master_addr, args.master_port)


def one_run(args: Request, device_type: str, command: str, **spec_fields) -> RunSpec:
    """The one run `bench run`, `bench maxbatch` and each approach of `bench tune` ask for, checked the same way
    for all (the request's own check already done): one value of each approach option, the task, its knobs, and
    that the variant runs there."""
    variant = get_variant(args.variant)
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
                   **{**request.run_settings(args), **spec_fields})
    if reason := spec.inapplicable():  # a library's model of the other framework among them, before it is built
        raise SpecError(f"{reason}: choose another variant or fewer devices")
    # Your own module's framework is known once it is built: what it returns.
    if refused := models.refusal(task.model.name, model_check.check(task, [variant]), variant):
        raise SpecError(f"{refused}: choose an approach of its framework (bench list)")
    return spec


def print_verdict(results: Folder) -> None:
    """The answer last on the console, where the eye lands when the command ends: the full verdict, then its
    headline (at most three lines a group)."""
    from bench.analysis import headline, verdict
    from bench.analysis.repeats import measured_runs

    print("\nverdict:\n" + "\n".join(f"  {line}" for line in verdict.verdict_lines(results)))
    short = headline.text(headline.headlines(results.configs, measured_runs(results.runs)))
    if short:
        print("\nanswer:\n" + "\n".join(f"  {line}" for line in short))
