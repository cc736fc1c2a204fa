"""The runs of a sweep: variants x device counts x engines, in the order that makes them comparable."""
from __future__ import annotations

import dataclasses

from bench.run.runspec import RunSpec
from bench.spec.devices import Machine, check_topology
from bench.spec import options
from bench.spec.task import SpecError, TaskSpec
from bench.spec.variants import Variant


def device_counts(max_devices: int) -> list[int]:
    """1, 2, 4, ... up to max_devices, and max_devices itself."""
    if max_devices < 1:
        raise SpecError(f"devices must be at least 1 (got {max_devices})")
    counts, n = [], 1
    while n < max_devices:
        counts.append(n)
        n *= 2
    return counts + [max_devices]


def given_counts(devices: str) -> list[int]:
    """--devices N[,M...]: the device counts named, ascending."""
    try:
        counts = sorted({int(n) for n in devices.split(",") if n.strip()})
    except ValueError:
        raise SpecError(f"--devices {devices!r}: give device counts, e.g. 8 or 1,8") from None
    if not counts or counts[0] < 1:
        raise SpecError(f"--devices {devices!r}: give device counts of at least 1, e.g. 8 or 1,8")
    return counts


def topology(devices: int, nodes: int) -> tuple[int, int]:
    """(nodes, devices per node) for a device count: split over `nodes` where it divides."""
    if nodes > 1 and devices >= nodes and devices % nodes == 0:
        return nodes, devices // nodes
    return 1, devices


def plan(variants: list[Variant], task: TaskSpec, device_type: str, counts: list[int], nodes: int = 1,
         cores_per_slot: int = 1, timeout_s: float = 900.0, analysis: bool = False,
         engines: list[tuple[str, str | None]] = (("torchrun", None),),
         variants_named: bool = False, compiled: bool = False,
         inputs: list[dict] | None = None, shardings: dict[str, list[dict]] | None = None) -> list[RunSpec]:
    """Runs in order: baselines first (efficiency needs them), each variant's counts ascending; with
    `compiled` each run eager and then compiled. With `analysis`, after each multi-device run that has
    one its independent (no gradient sync) twin; each one-device run on a real dataset measures the input
    pipeline's cost in its own input phases, where its framework's loops have them, else its synthetic-input
    twin follows it. `inputs` (task fields: input, loader_workers, data_url) runs each configuration once per input pipeline;
    a synthetic-input twin is planned once, not once per pipeline. `shardings` (variant name -> the task fields
    of its approach options, bench.spec.options) runs that variant once per value, e.g. deepspeed at ZeRO-1, 2
    and 3; a no-sync twin its approach refuses is not planned."""
    check_topology(max(counts), nodes, "--max-devices")
    specs = []
    for engine, address in engines:
        for variant in sorted(variants, key=lambda v: v.baseline is not None):
            if engine != "torchrun" and not variant.engine_entry and not variants_named:
                continue  # the default list under an engine: only what an engine can run (named: refused)
            for n in counts:
                if variant.max_devices is not None and n > variant.max_devices:
                    continue
                scaled = task.for_world(n)  # weak scaling: the global batch (and learning rate) grow with n
                ways = (shardings or {}).get(variant.name) or options.modes(variant, {}, sweep=True)
                sharded = [scaled.replace(**fields) for fields in ways]
                pipelines = [way.replace(**fields) for way in sharded for fields in (inputs or [{}])]
                eager_and_compiled = compiled and variant.compiles
                modes = [m for fed in pipelines for m in ([fed, fed.replace(compile=True)] if eager_and_compiled else [fed])]
                for mode in modes:
                    # The input's cost in the run itself where its framework's loops can (the input phases),
                    # else from a synthetic-input twin: another run, so another moment of a shared machine.
                    # On several ranks, an approach that can train a window with its sync off and undo it measures
                    # its exposed communication in the same phases, in place of a no-sync run.
                    phased = analysis and not mode.synthetic and variant.times_input_in_phases and (
                        n == 1 or variant.sync_phases)
                    spec = RunSpec(variant, mode.replace(input_phases=True) if phased else mode, device_type, *topology(n, nodes), cores_per_slot=cores_per_slot,
                                   timeout_s=timeout_s, engine=engine, engine_address=address)
                    specs.append(spec)
                    no_sync = dataclasses.replace(spec, independent=True)
                    if analysis and variant.independent and n > 1 and not phased and options.accepts(no_sync):
                        specs.append(no_sync)
                    twin = mode.replace(input="synthetic", loader_workers=0, data_url=None)
                    if (analysis and n == 1 and not mode.synthetic and not phased
                            and dataclasses.replace(spec, task=twin) not in specs):
                        specs.append(dataclasses.replace(spec, task=twin))
    return specs


def first_answer(spec: RunSpec, most: int) -> bool:
    """The runs the verdict's main comparison rests on: each approach (not a single-device baseline, not a no-sync
    or synthetic-input twin) at the most devices of the sweep."""
    return (spec.world_size == most and spec.variant.baseline is not None and not spec.independent
            and (spec.task.data.dataset == "synthetic" or spec.task.data.input != "synthetic"))


def answer_first(specs: list[RunSpec]) -> tuple[list[RunSpec], int]:
    """The plan with the main comparison's runs moved to the front, each run's order otherwise kept, so that a
    provisional verdict can be given after them (bench.commands.cmd_sweep); and how many runs that is."""
    if not specs:
        return specs, 0
    most = max(s.world_size for s in specs)
    first = [s for s in specs if first_answer(s, most)]
    return first + [s for s in specs if not first_answer(s, most)], len(first)


def rounds(specs: list[RunSpec], repeats: int) -> list[RunSpec]:
    """The whole list `repeats` times, round-robin, so that drifts of the machine spread over every
    configuration instead of hitting one."""
    return specs * repeats


def check_all(specs: list[RunSpec], machine: Machine) -> None:
    """Fail before anything starts: one bad run stops the whole sweep with its one-line error."""
    for spec in specs:
        if spec.inapplicable() is None:
            spec.check(machine)
