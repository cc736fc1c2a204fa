"""An approach's own knobs, the settings an expert tunes before comparing approaches: each declared in the
approach's package (`Variant.knobs` names the tuple), typed, with its framework's default and the values worth
trying. A run's settings (`bench run --set name=value`) are one task field, `RunOptions.knobs`, in one canonical
text ("bucket_cap_mb=100 static_graph=true"), so that they are part of the run key, of the series label and of
every row; the rank reads them back typed (`values`) and hands them to its framework.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from bench.spec.task import SpecError, knob_texts


@dataclass(frozen=True)
class Knob:
    name: str                          # what --set names: bucket_cap_mb
    help: str                          # what it sets in the framework, in its own words
    parse: Callable[[str], object]     # one value's text -> the value (ValueError: not one)
    default: object                    # what a run without --set gets (the framework's own unless help says)
    tries: tuple = ()                  # the values worth trying beside the default
    # It changes the arithmetic, not only the speed (a bf16 gradient all-reduce): the report names it, and a tuned
    # run's exact accuracy must stay within the task's target.
    changes_arithmetic: bool = False
    # Why a value does not fit a task (TaskSpec), None where it does: Keras' steps_per_execution must divide the
    # timing windows.
    fits: Callable[[object, object], str | None] | None = None
    # The `bench tune` flag that races it ("": raced by default): a knob that changes the recipe, or whose every
    # run pays a cost the race cannot price from the defaults' (a compilation).
    opt_in: str = ""

    def text(self, value) -> str:
        """The canonical text of a value (what the run key and the row hold); None: a default the framework
        chooses by itself (DeepSpeed's overlap_comm by stage)."""
        if value is None:
            return "(framework's)"
        return str(value).lower() if isinstance(value, bool) else str(value)


def boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes", "on"):
        return True
    if text.lower() in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{text!r} is not true or false")


def choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in names:
            raise ValueError(f"{text!r} is not one of {', '.join(names)}")
        return text
    return parse


def scale(text: str) -> float:
    value = float(text)
    if not 0 < value <= 64:
        raise ValueError(f"{text!r} is not a factor between 0 and 64")
    return value


def whole_batches(value: float, task) -> str | None:
    """Why a batch scaled by `value` is not whole batches on every device (TaskSpec as the run's world trains it)."""
    for name, batch in (("global", task.recipe.global_batch), ("per-device", task.recipe.per_device_batch)):
        if batch is not None and (batch * value != int(batch * value) or batch * value < 1):
            return f"the {name} batch {batch} times {value:g} is not a whole number of samples"
    return None


def unset_option(flag: str, field: str, group: str) -> Callable[[object, object], str | None]:
    """A knob that sets a task option fits only a task that leaves that option as shipped."""
    def fits(value, task) -> str | None:
        given = getattr(getattr(task, group), field)
        shown = flag if given is True else f"{flag} {given}"
        return f"the task sets {shown} itself: drop it to tune it" if given else None
    return fits


def reads_files(value, task) -> str | None:
    if not task.reads_files:
        return f"--input {task.data.input} reads no files: the loader workers decode files (--input files or s3)"
    return unset_option("--loader-workers", "loader_workers", "data")(value, task)


# Every approach's (TaskSpec.with_knobs applies them). The per-device batch changes the recipe (the learning rate
# follows it by the task's rule), so `bench tune` races it only with --tune-batch; a compiled run pays its
# compilation in every run, which the race prices from uncompiled ones, so only with --tune-compile.
BATCH_SCALE = Knob(
    "batch_scale", "the recipe's per-device batch (and global batch) times this, the learning rate scaled by the "
    "task's rule (--lr-scaling); under --device-memory a batch that does not fit is recorded as such", scale, 1.0,
    (0.5, 2.0, 4.0), changes_arithmetic=True, fits=whole_batches, opt_in="--tune-batch")
COMPILE = Knob(
    "compile", "--compile: torch.compile (Accelerate: its dynamo plugin) / TensorFlow XLA; the compilation, in the "
    "untimed first steps, lengthens every run", boolean, False, (True,),
    fits=unset_option("--compile", "compile", "options"), opt_in="--tune-compile")
LOADER_WORKERS = Knob(
    "loader_workers", "--loader-workers: the file pipeline's parallel decoders (DataLoader worker processes, "
    "tf.data map threads), their cores taken from the slot's", int, 0, (1, 2), fits=reads_files)
COMMON = (BATCH_SCALE, COMPILE, LOADER_WORKERS)


def declared(reference: str | None) -> tuple[Knob, ...]:
    """The knobs a variant declares ("package.module:NAME" of a tuple of Knob), () where it declares none."""
    if not reference:
        return ()
    module, name = reference.split(":")
    return getattr(importlib.import_module(module), name)


def settable(reference: str | None) -> tuple[Knob, ...]:
    """What `--set` takes for a variant: its own knobs, then every approach's (COMMON)."""
    return declared(reference) + COMMON


def canonical(knobs: tuple[Knob, ...], sets: list[str], variant: str) -> str:
    """`--set name=value` texts -> the task field's canonical text (sorted by name; a value equal to the
    framework's default is kept: it was asked for). An unknown knob or a value it does not take is one line
    naming the knobs, as a SpecError."""
    by_name = {k.name: k for k in knobs}
    names = ", ".join(by_name) or "none"
    chosen: dict[str, str] = {}
    for text in sets:
        name, sep, value = text.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise SpecError(f"--set {text!r}: give name=value, e.g. --set {next(iter(by_name), 'name')}=VALUE")
        if name not in by_name:
            raise SpecError(f"{variant} has no knob {name!r}: its knobs are {names}")
        knob = by_name[name]
        try:
            chosen[name] = knob.text(knob.parse(value))
        except ValueError as exc:
            raise SpecError(f"--set {name}={value}: {exc} (the default is {knob.text(knob.default)})") from None
    return " ".join(f"{name}={chosen[name]}" for name in sorted(chosen))


def chosen(knobs: tuple[Knob, ...], text: str) -> dict[str, object]:
    """The knobs a run whose task holds `text` set, typed (none set: {})."""
    given = knob_texts(text)
    return {k.name: k.parse(given[k.name]) for k in knobs if k.name in given}


def values(knobs: tuple[Knob, ...], text: str) -> dict[str, object]:
    """Every knob's value for a run whose task holds `text`: its setting, else its default."""
    return {**{k.name: k.default for k in knobs}, **chosen(knobs, text)}


def changing_arithmetic(knobs: tuple[Knob, ...], text: str) -> list[str]:
    """The knobs a run's settings set that change the arithmetic, not only the speed."""
    return [name for name in chosen(knobs, text) if next(k for k in knobs if k.name == name).changes_arithmetic]


def misfit(knobs: tuple[Knob, ...], text: str, task) -> str | None:
    """Why a run's settings do not fit its task (one line naming the knob), None where they do."""
    for name, value in chosen(knobs, text).items():
        knob = next(k for k in knobs if k.name == name)
        if knob.fits and (why := knob.fits(value, task)):
            return f"--set {name}={knob.text(value)}: {why}"
    return None
