"""Approach options: flags an approach declares in its own package (`<approach>_impl/options.py`, named by the
variants table) as fields of its settings dataclass, each value a task field, so that it is part of the run key and of the series label
("deepspeed (ZeRO-3)"). The harness adds the flags to the command line, expands a sweep over their values and
refuses them on variants that do not take them; what a value means is the approach's business.

An approach's options module has
    OPTIONS: tuple[Option, ...]                          the flags it takes, in label order
    modes(given: dict[str, list], sweep: bool) -> list[dict]   the task fields of each run it makes of them
    check(spec) -> None                                  its own refusals (SpecError), before anything starts
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from bench.spec.setting import Setting, declared
from bench.spec.task import SpecError
from bench.spec.variants import VARIANTS, Variant


@dataclass(frozen=True)
class Option:
    """One of an approach's options: a field of its settings dataclass (`settings`, its flag and help on the
    field, bench.spec.setting) named as the TaskSpec field it sets, how a value is read, and its label."""
    settings: type                   # the approach's settings dataclass, whose field declares the flag
    field: str                       # its name there and the TaskSpec field it sets: zero_stage
    parse: Callable[[str], object]   # one command-line value (SpecError naming the choices)
    label: str                       # its part of the series name: "ZeRO-{}"

    @property
    def setting(self) -> Setting:
        return next(s for s in declared(self.settings) if s.dest == self.field)

    @property
    def flag(self) -> str:  # --zero-stage
        return self.setting.options[0]


def options_of(variant: Variant) -> tuple[Option, ...]:
    module = variant.options_module
    return module.OPTIONS if module else ()


def every_option() -> dict[str, Option]:
    """Every approach's options by field, each once (accelerate's DeepSpeed plugin takes DeepSpeed's stage)."""
    return {o.field: o for v in VARIANTS.values() for o in options_of(v)}


def settings() -> list[Setting]:
    """Every approach's options as command-line settings (bench.spec.setting generates them), each under its field."""
    return [option.setting for option in every_option().values()]


def given(args: argparse.Namespace) -> dict[str, list]:
    """The values named on the command line, by field (a sweep takes several, comma-separated)."""
    out = {}
    for field, option in every_option().items():
        text = getattr(args, field, None)
        values = [option.parse(part.strip()) for part in str(text or "").split(",") if part.strip()]
        if values:
            out[field] = values
    return out


def takers(field: str) -> list[str]:
    return [v.name for v in VARIANTS.values() if any(o.field == field for o in options_of(v))]


def refuse_untaken(given_values: dict[str, list], variants: list[Variant]) -> None:
    """A sweep: every option named is used by a run of one of its variants."""
    used = {field for v in variants for mode in modes(v, given_values, sweep=True)
            for field, value in mode.items() if value is not None}
    for field in given_values.keys() - used:
        raise SpecError(f"{every_option()[field].flag} goes with {', '.join(takers(field))}: add one to --variants")


def modes(variant: Variant, given_values: dict[str, list], sweep: bool) -> list[dict]:
    """The task fields of each run this variant makes of the options named ([{}]: one run, none set). One run
    of a variant that takes none of them keeps the first values, for `check` to refuse with the fix; a sweep leaves them to the variants
    that take them."""
    module = variant.options_module
    made = module.modes(given_values, sweep) if module else [{}]
    if sweep:
        return made
    mine = {o.field for o in options_of(variant)}
    foreign = {field: values[0] for field, values in given_values.items() if field not in mine}
    return [{**foreign, **mode} for mode in made]


def check(spec) -> None:
    """The options set on the run's task go with its variant, and its approach accepts their values."""
    task, mine = spec.task.to_dict(), {o.field for o in options_of(spec.variant)}
    for field, option in every_option().items():
        if task.get(field) is not None and field not in mine:
            raise SpecError(f"{spec.variant.name} has no {option.flag}: {option.flag} goes with "
                            f"{', '.join(takers(field))}")
    module = spec.variant.options_module
    if module is not None:
        module.check(spec)


def accepts(spec) -> bool:
    try:
        check(spec)
    except SpecError:
        return False
    return True


def label(variant: str, task: dict) -> str:
    """The run's part of the series name from its options: "deepspeed plugin, ZeRO-3" ("" with none)."""
    known = VARIANTS.get(variant)
    options = options_of(known) if known else ()
    return ", ".join(o.label.format(task[o.field]) for o in options if task.get(o.field) is not None)
