"""Which settings each command takes, and in what order its --help lists them: its layers (bench.request.settings;
the task's, the approaches' and the metrics' settings where they are declared). bench.cli generates the parser
from this table; bench.request reads and checks a command's request by it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Union

from bench import metrics
from bench.request import settings as layers
from bench.spec import options
from bench.spec import task as task_spec
from bench.spec.setting import Setting, declared

# A layer: a settings dataclass (bench.request.settings), or where the settings are declared elsewhere, what
# lists them: the task's fields, the approaches' options, the metrics'.
Layer = Union[type, Callable[[], list[Setting]]]
TASK: tuple[Layer, ...] = (layers.TaskChoice, task_spec.settings, options.settings, layers.Placement)


@dataclass(frozen=True)
class Command:
    """A subcommand: its one-line help, its settings' layers in the order --help lists them, and what runs it
    (a function of bench.commands, looked up when the parser is built)."""
    help: str
    layers: tuple[Layer, ...] = ()
    run: str = ""
    description: str | None = None


COMMANDS = {
    "list": Command("variants, tasks and the devices found", run="cmd_list"),
    "run": Command("one run: one row appended to OUT/results.jsonl",
                   (metrics.options, layers.Plan, layers.Hosts, layers.OneRun, layers.Execution, layers.Engines,
                    *TASK), "cmd_run"),
    "sweep": Command("variants x device counts 1, 2, 4 ... N, then a table and report.md",
                     (metrics.options, layers.Plan, layers.Engines, layers.Execution, *TASK), "cmd_sweep"),
    "maxbatch": Command("the largest global batch a variant trains on N devices: probes until out of memory, then "
                        "bisects (out of memory caught and recorded)", (layers.Plan, *TASK), "cmd_maxbatch"),
    "tune": Command("each approach at its best within a time budget: its own knobs raced in short runs, then its "
                    "best and its defaults confirmed, ranked apart in the report",
                    (layers.Plan, layers.Execution, *TASK), "cmd_tune",
                    "Races each approach's knobs within --budget. How it pairs runs (--pairing turns, the default): "
                    "each setting runs as a duet with the approach's defaults, the two runs alive at once and taking "
                    "turns window by window, so that window i of each is timed milliseconds from the other's and the "
                    "machine's drift hits both alike; a duet's ratio is the median of its paired windows' ratios, "
                    "a setting's interval the Student t interval over its duets (as `bench regress` judges duets). "
                    "A round adds a duet only to the settings whose interval still straddles 1 and reaches a 5 % "
                    "gain; a setting is out once its interval lies below 1 or within 5 % of it, and the best of "
                    "those wholly above 1 is confirmed in full-length duets against the defaults. Where two runs "
                    "of an approach cannot be alive at once (memory), its pairs run one after the other, who goes "
                    "first alternating (--pairing interleaved, also said in the output); --pairing none races the "
                    "settings' short runs one after another on their own medians (drift included). A budget that "
                    "cannot hold the pairing is refused before any run."),
    "peak": Command("the device's measured peak: large matmuls per precision on one device slot",
                    (layers.Placement,), "cmd_peak"),
    "collectives": Command("all-reduce, all-gather and reduce-scatter on one topology and their α–β fits; across "
                           "two real hosts, the link `bench project --between-nodes` reads",
                           (layers.Plan, layers.Hosts, layers.Placement), "cmd_collectives"),
    "schema": Command("the result row's JSON Schema (docs/row.schema.json)", run="cmd_schema"),
    "report": Command("report.md, report.html, results.csv and results.parquet from a results directory",
                      (layers.Folder, metrics.options), "cmd_report"),
    "compare": Command("several machines' results folders side by side: compare.md and compare.html",
                       (layers.Compare,), "cmd_compare",
                       "Lays several machines' results folders side by side, each machine named by the environment "
                       "its rows recorded: per configuration (variant, device count, task) its throughput per "
                       "device, its ratio to the fastest on the same machine, test accuracy, and samples per dollar "
                       "and energy per sample where known. Never a ratio across machines."),
    "project": Command("PROJECTED: each synchronous approach of a sweep at 1, 2, 8, 64, 512 devices, from its "
                       "measured compute, collectives and overlap; prints a table, draws DIR/projection.png",
                       (layers.Folder, layers.Project), "cmd_project",
                       "Projects each synchronous approach of a results folder to more devices (weak scaling): "
                       "compute from its one-device run, communication from the folder's collective fits, the "
                       "share hidden behind the backward pass as measured at the most devices; intervals from the "
                       "inputs' measured spreads. See docs/projection.md."),
    "data": Command("prepare the tasks' datasets into the cache; `data export-images --task T DIR` writes one as an "
                    "image folder (DIR/train/<class>/*, DIR/test/<class>/*)", (layers.Data,), "cmd_data"),
    "regress": Command("did a change slow training down? A/B against a revision, or two files", (layers.Regress,),
                       "cmd_regress"),
    "history": Command("change points over commits in CI's results: when a slowdown came in, the smallest change "
                       "each runner can see, and a page", (layers.History,), "cmd_history"),
    # the task and model as `bench run` takes them; a library model at 32 px, synthetic
    "overhead": Command("the harness (torch-single, tf-single on 1 device) vs a plain loop of its framework and, "
                        "for a timm model, vs timm's train benchmark, interleaved; unless given, at least 10 warm-up "
                        "steps and 8 windows of 10", (*TASK, layers.Studies), "cmd_overhead"),
    # the task the switches are measured on (synthetic input, 5 windows a side)
    "audit": Command("the fast-path audit alone: each framework's kernel switches on and off on this machine (a "
                     "sweep runs it once per machine), into OUT/fast_path.jsonl", (*TASK, layers.Studies),
                     "cmd_audit"),
    "gpu-check": Command("the one-GPU check of a lent GPU machine: each PyTorch approach, the memory cap, power and "
                         "energy, the peer check against timm, torch.compile and the fast-path audit on ResNet-50, "
                         "within a time budget, into one folder", (layers.GpuCheck,), "cmd_gpu_check"),
}


def settings_of(layer: Layer) -> list[Setting]:
    return declared(layer) if dataclasses.is_dataclass(layer) else layer()


def dataclass_layers(command: str) -> tuple[type, ...]:
    """The command's layers that are settings dataclasses of bench.request.settings: what its request reads."""
    return tuple(layer for layer in COMMANDS[command].layers if dataclasses.is_dataclass(layer))
