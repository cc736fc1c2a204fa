"""`dtbench` (or `python -m bench`): its options (list, run, sweep, maxbatch, peak, report, compare, data, regress, history,
overhead, audit, gpu-check), parsed and handed to the command (bench.commands); a bad request is one line and exit 2."""
from __future__ import annotations

import argparse
import errno
import logging
import sys
from pathlib import Path

import bench
from bench import commands, install, metrics
from bench.interrupt import Interrupted, stop_on_signals
from bench.metrics.cost import price
from bench.history import command as history
from bench.results.store import StoreError
from bench.run.sampler import DEFAULT_INTERVAL_S
from bench.spec import options
from bench.spec import frameworks
from bench.spec import task as task_flags
from bench.spec.task import DEFAULT_TASK, PRESETS, SpecError
from bench.spec.variants import DEFAULT_COMPARED, ENGINES, VARIANTS
from bench.status import Status
from bench.studies.gpu_check import DEFAULT_BUDGET_S

log = logging.getLogger("bench")
DEFAULT_OUT = Path("results/latest")
# Kept to warnings under -v: where they found credentials, each call; every font's score while a figure is drawn.
CHATTY_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "matplotlib")
FAMILY_CHOICES = ("both", *frameworks.names())  # --framework of overhead and audit


def _add_profile_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", action="store_true",
                   help="run the framework's profiler over 2 windows after the warm-up (not timed): a trace in the "
                        "run folder's profile/ and where the step goes in the row and the report")


def _add_opt_in_knobs(p: argparse.ArgumentParser) -> None:
    """The knobs a tuning races only when asked (bench.spec.knobs: Knob.opt_in)."""
    p.add_argument("--tune-batch", action="store_true",
                   help="race the per-device batch too (the batch_scale knob: 0.5, 2 and 4 times the recipe's, the "
                        "learning rate by its rule): it changes the recipe, so a setting ranks only where its test "
                        "accuracy reaches the task's target; under --device-memory a batch that does not fit drops out")
    p.add_argument("--tune-compile", action="store_true",
                   help="race compile=true too (torch.compile / XLA): each compiled run pays its compilation, which "
                        "the race prices from the defaults' uncompiled runs, so the budget may run over by it")


def _add_malloc_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--malloc", choices=("tuned", "glibc"), default="tuned",
                   help="tuned (default): glibc's malloc with a fixed mmap threshold and no trimming, so a step's "
                        "tensors reuse the heap instead of faulting in fresh pages; glibc: as glibc ships it")


def _add_fast_path_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-shipped", action="store_true",
                   help="run every framework on its own defaults instead of its fast path for this machine "
                        "(TensorFlow's oneDNN kernels on x86, PyTorch's cuDNN autotuning, TF32 and channels_last on "
                        "CUDA); rows say which, and the report names them \"(as shipped)\"")


def _add_task_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help=f"task preset: {', '.join(PRESETS)} (default: {DEFAULT_TASK['cpu']} on a CPU, the "
                                  f"small CNN; {DEFAULT_TASK['cuda']} on GPUs, ResNet-50 at 224 px in bf16)")
    task_flags.add_arguments(p)  # each declared on its field (bench.spec.task)
    options.add_arguments(p)  # each approach's own (--zero-stage, --accelerate-plugin)
    p.add_argument("--model-module", metavar="PKG.MODULE:FUNCTION",
                   help="your own model: FUNCTION(channels=, classes=, image_size=) returns a torch.nn.Module or a "
                        "Keras model; the approaches of its framework train it")
    p.add_argument("--device-type", choices=("auto", "cpu", "cuda"), default="auto",
                   help="cuda when GPUs are visible, else cpu (default: auto)")
    p.add_argument("--cores-per-slot", type=int, default=1, help="CPU cores per device slot (default 1)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds before a run is killed (default 900)")
    p.add_argument("--sample-every", type=float, default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                   help="sample each rank's memory and CPU (and each GPU) this often into the run folder's "
                        f"time series and its plot (default {DEFAULT_INTERVAL_S}; 0: off)")
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
    p.add_argument("--mlflow", metavar="URI", nargs="?", const="",
                   help="also log each run to MLflow, e.g. sqlite:///mlruns.db; without a URI to MLFLOW_TRACKING_URI "
                        "(the experiment: MLFLOW_EXPERIMENT_NAME, else dtbench; spec as params, figures as metrics, "
                        "the trained model as an MLflow model)")


def _add_host_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--node-rank", type=int, help="real multi-host: run only this node's share here")
    p.add_argument("--master-addr", default="127.0.0.1", help="real multi-host: node 0's address")
    p.add_argument("--master-port", type=int, help="real multi-host: a port free on node 0 (the same on every host)")
    p.add_argument("--ifname", help="real multi-host: the network interface the collectives use (default: the one "
                                    "this host's route to --master-addr leaves by)")


def one_line(message: str) -> str:
    """An error as one printable line: a value given with a newline or a carriage return shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        super().error(one_line(message))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog=bench.command(), description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"dtbench {install.version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="variants, tasks and the devices found").set_defaults(func=commands.cmd_list)

    p = sub.add_parser("run", help="one run: one row appended to OUT/results.jsonl")
    metrics.add_options(p)
    p.add_argument("--variant", required=True, help=f"one of {', '.join(VARIANTS)}")
    p.add_argument("--devices", type=int, default=1, help="device slots in all (world size)")
    p.add_argument("--nodes", "--nnodes", type=int, default=1,
                   help="nodes the devices are split over (fake nodes on this host unless --node-rank is given)")
    _add_host_options(p)
    p.add_argument("--resume-from", type=Path, metavar="RUN_DIR",
                   help="continue that run (OUT/runs/ID, run with --checkpoint-every-epoch) from its last checkpoint")
    p.add_argument("--independent", action="store_true",
                   help="gradient synchronisation off (torch-ddp, accelerate): the no-communication bound")
    p.add_argument("--set", action="append", metavar="NAME=VALUE",
                   help="one of the approach's own knobs, set for this run (repeatable; `bench list` names "
                        "them, with the framework's default and the values worth trying)")
    _add_malloc_option(p)
    _add_fast_path_option(p)
    _add_profile_option(p)
    _add_engine_options(p, several=False)
    _add_task_options(p)
    p.set_defaults(func=commands.cmd_run)

    p = sub.add_parser("sweep", help="variants x device counts 1, 2, 4 ... N, then a table and report.md")
    metrics.add_options(p)
    p.add_argument("--variants", default="all", help="comma-separated variant names (default all)")
    p.add_argument("--max-devices", type=int, default=2, help="largest device count (default 2)")
    p.add_argument("--devices", metavar="N[,M...]",
                   help="only these device counts (e.g. 8, or 1,8) instead of 1, 2, 4 ... --max-devices")
    p.add_argument("--models", metavar="A,B,...",
                   help="sweep each of these models (any --model name) in turn: a verdict and table per model, and "
                        "throughput per device against model size")
    p.add_argument("--nodes", type=int, default=1, help="fake nodes (default 1)")
    p.add_argument("--repeats", type=int, default=1,
                   help="run the whole sweep R times, round-robin; the report folds repeats (default 1)")
    p.add_argument("--tune", type=float, metavar="MINUTES",
                   help="then `bench tune` each approach with knobs at the most devices within MINUTES: the report "
                        "ranks them at their best beside as shipped")
    _add_opt_in_knobs(p)
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
                        "the collective microbenchmarks")
    _add_engine_options(p, several=True)
    _add_malloc_option(p)
    _add_fast_path_option(p)
    _add_profile_option(p)
    _add_task_options(p)
    p.set_defaults(func=commands.cmd_sweep)

    p = sub.add_parser("maxbatch", help="the largest global batch a variant trains on N devices: probes until "
                                        "out of memory, then bisects (out of memory caught and recorded)")
    p.add_argument("--variant", required=True, help=f"one of {', '.join(VARIANTS)}")
    p.add_argument("--devices", type=int, default=1, help="device slots in all (world size)")
    p.add_argument("--nodes", type=int, default=1, help="fake nodes the devices are split over (default 1)")
    p.add_argument("--max-batch", type=int, default=65536, help="stop doubling here (default 65536)")
    p.add_argument("--resolution", type=int, default=1,
                   help="stop bisecting when what fits and what does not are this many samples a device apart "
                        "(default 1: exact)")
    _add_task_options(p)
    p.set_defaults(func=commands.cmd_maxbatch)

    p = sub.add_parser("tune", help="each approach at its best within a time budget: its own knobs raced in short "
                                    "runs, then its best and its defaults confirmed, ranked apart in the report")
    p.add_argument("--variants", required=True, help="comma-separated approaches with knobs (`bench list`)")
    p.add_argument("--devices", type=int, default=2, help="device slots in all (default 2)")
    p.add_argument("--nodes", type=int, default=1, help="fake nodes the devices are split over (default 1)")
    p.add_argument("--budget", type=float, required=True, metavar="MINUTES", help="the whole tuning's time")
    p.add_argument("--repeats", type=int, default=3,
                   help="full-length runs of each approach's best and of its defaults (default 3)")
    _add_opt_in_knobs(p)
    p.add_argument("--resume", action="store_true",
                   help="go on with a stopped tuning of the same request in --out: its finished runs count as run, "
                        "their time as spent")
    p.add_argument("--allow-mixed-revisions", action="store_true",
                   help="--resume over rows another code revision wrote (their runs count as done)")
    _add_malloc_option(p)
    _add_task_options(p)
    p.set_defaults(func=commands.cmd_tune)

    p = sub.add_parser("peak", help="the device's measured peak: large matmuls per precision on one device slot")
    p.add_argument("--device-type", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--cores-per-slot", type=int, default=1, help="CPU cores of the slot (default 1)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (default results/latest)")
    p.set_defaults(func=commands.cmd_peak)

    p = sub.add_parser("collectives", help="all-reduce, all-gather and reduce-scatter on one topology and their "
                                           "α–β fits; across two real hosts, the link `bench project "
                                           "--between-nodes` reads")
    p.add_argument("--devices", type=int, default=2, help="ranks in all (default 2)")
    p.add_argument("--nodes", "--nnodes", type=int, default=1,
                   help="nodes the ranks are split over (fake nodes on this host unless --node-rank is given)")
    _add_host_options(p)
    p.add_argument("--device-type", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds before it is killed (default 300)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="results directory (default results/latest)")
    p.set_defaults(func=commands.cmd_collectives)

    sub.add_parser("schema", help="the result row's JSON Schema (docs/row.schema.json)").set_defaults(
        func=commands.cmd_schema)

    p = sub.add_parser("report", help="report.md, report.html, results.csv and results.parquet from a results directory")
    p.add_argument("dir", type=Path, nargs="?", default=DEFAULT_OUT)
    metrics.add_options(p)
    p.set_defaults(func=commands.cmd_report)

    p = sub.add_parser("compare", help="several machines' results folders side by side: compare.md and compare.html",
                       description="Lays several machines' results folders side by side, each machine named by "
                                   "the environment its rows recorded: per configuration (variant, device count, task) "
                                   "its throughput per device, its ratio to the fastest on the same machine, test "
                                   "accuracy, and samples per dollar and energy per sample where known. Never a ratio "
                                   "across machines.")
    p.add_argument("dirs", type=Path, nargs="*", metavar="DIR", help="two or more results folders, one per machine")
    p.add_argument("--out", type=Path, default=Path("results/compare"),
                   help="where compare.md and compare.html go (default results/compare, rewritten each time)")
    p.add_argument("--price-per-device-hour", dest="prices", type=price, nargs="+", metavar="USD",
                   help="what one device of each machine costs an hour, one price per DIR in their order, after "
                        "the folders: samples per dollar in the table")
    p.set_defaults(func=commands.cmd_compare)

    p = sub.add_parser("project", help="PROJECTED: each synchronous approach of a sweep at 1, 2, 8, 64, 512 devices, "
                                       "from its measured compute, collectives and overlap; prints a table, draws "
                                       "DIR/projection.png",
                       description="Projects each synchronous approach of a results folder to more devices (weak "
                                   "scaling): compute from its one-device run, communication from the folder's "
                                   "collective fits, the share hidden behind the backward pass as measured at the most "
                                   "devices; intervals from the inputs' measured spreads. See docs/projection.md.")
    p.add_argument("dir", type=Path, nargs="?", default=DEFAULT_OUT)
    p.add_argument("--devices-per-node", type=int, metavar="N",
                   help="devices a node: beyond them the link is --alpha-us/--busbw-gbps (default: the most devices "
                        "the sweep ran)")
    p.add_argument("--alpha-us", type=float, metavar="US", help="the link between nodes: a collective's latency at 2 "
                                                                "ranks, microseconds (with --busbw-gbps)")
    p.add_argument("--busbw-gbps", type=float, metavar="GB/S", help="the link between nodes: its bus bandwidth, "
                                                                    "GB/s as nccl-tests reports it (with --alpha-us)")
    p.add_argument("--between-nodes", type=Path, metavar="DIR",
                   help="the link between nodes as measured: a folder `bench collectives --nnodes 2 --node-rank R` "
                        "wrote across two hosts (instead of --alpha-us/--busbw-gbps)")
    p.add_argument("--network", metavar="NAME", help="the link between nodes by name: ib-8x400g, ib-8x200g, "
                                                     "ethernet-100g, ethernet-25g (sources: docs/projection.md)")
    p.add_argument("--within-node", metavar="NAME", help="a node's link by name in place of the one measured here: "
                                                         "nvlink-a100, nvlink-h100 (8 devices a node unless "
                                                         "--devices-per-node)")
    p.set_defaults(func=commands.cmd_project)

    p = sub.add_parser("data", help="prepare the tasks' datasets into the cache; `data export-images --task T DIR` "
                                    "writes one as an image folder (DIR/train/<class>/*, DIR/test/<class>/*)")
    p.add_argument("tasks", nargs="*", default=["quick", "default"])
    p.add_argument("--task", default="default", help="export-images: the task whose dataset to write")
    p.add_argument("--format", choices=("png", "jpeg"), default="png", help="export-images: png (lossless, "
                                                                            "default) or jpeg")
    p.add_argument("--install", action="store_true", help="install Debian's dataset-fashion-mnist if missing")
    p.add_argument("--download", action="store_true", help="opt-in: download Fashion-MNIST (needs internet)")
    p.add_argument("--data-dir")
    p.set_defaults(func=commands.cmd_data)

    p = sub.add_parser("regress", help="did a change slow training down? A/B against a revision, or two files")
    p.add_argument("--against", metavar="REV", help="A/B on this machine: REV (baseline) vs the current tree")
    p.add_argument("--baseline", metavar="OLD.jsonl", help="a stored results file (or directory)")
    p.add_argument("--current", metavar="NEW.jsonl", help="the results file to judge against it")
    p.add_argument("--duets", action="store_true",
                   help="with --baseline/--current: judge the files' runs as duets (the baseline/ and current/ "
                        "folders an earlier --against wrote), e.g. again with another threshold")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the check itself: A/A false alarms, detection of injected slowdowns")
    p.add_argument("--variants", default=DEFAULT_COMPARED, help=f"runs to compare (default {DEFAULT_COMPARED})")
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
    p.set_defaults(func=commands.cmd_regress)

    history.add_parser(sub)

    p = sub.add_parser("overhead", help="the harness (torch-single, tf-single on 1 device) vs a plain loop of its "
                                        "framework and, for a timm model, vs timm's train benchmark, interleaved; "
                                        "unless given, at least 10 warm-up steps and 8 windows of 10")
    _add_task_options(p)  # the task and model as `bench run` takes them; a library model at 32 px, synthetic
    p.add_argument("--framework", choices=FAMILY_CHOICES, default="both",
                   help="whose harness run and plain loop to compare (default both: each that builds the model, "
                        "their rounds interleaved)")
    p.add_argument("--of", choices=("harness", "sampler"), default="harness",
                   help="harness: the harness against a plain loop; sampler: torch-ddp on 2 slots unsampled against "
                        "--sample-every 0.5 and 0.05, rounds in rotating order")
    p.add_argument("--repeats", type=int, default=3, help="rounds of the sides, or of the sampler's three (default 3)")
    p.set_defaults(out=Path("results/latest/overhead"))
    p.set_defaults(func=commands.cmd_overhead)

    p = sub.add_parser("audit", help="the fast-path audit alone: each framework's kernel switches on and off on this "
                                     "machine (a sweep runs it once per machine), into OUT/fast_path.jsonl")
    _add_task_options(p)  # the task the switches are measured on (synthetic input, 5 windows a side)
    p.add_argument("--framework", choices=FAMILY_CHOICES, default="both",
                   help="whose switches (default both: each that has one for this device type)")
    p.add_argument("--again", action="store_true",
                   help="measure even where this machine's cache already holds the figures")
    p.set_defaults(func=commands.cmd_audit)

    p = sub.add_parser("gpu-check", help="the one-GPU check of a lent GPU machine: each PyTorch approach, the memory "
                                         "cap, power and energy, the peer check against timm, torch.compile and the "
                                         "fast-path audit on ResNet-50, within a time budget, into one folder")
    p.add_argument("--dry-run", action="store_true",
                   help="print every run it would make with its time estimate, and run nothing (on any machine)")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="SECONDS",
                   help=f"the whole check's time (default {DEFAULT_BUDGET_S:.0f}): a step that would not fit in what "
                        "is left is recorded as skipped")
    p.add_argument("--only", metavar="GROUPS", help="only these groups or steps, comma-separated (approaches, energy, "
                                                    "memory, peer, compile, audit, tensorflow, report): a second call "
                                                    "for what was skipped; the folder keeps the other steps' outcomes")
    p.add_argument("--out", type=Path, help="the folder (default results/gpu-check-<the GPU's name>)")
    p.set_defaults(func=commands.cmd_gpu_check)
    for command in sub.choices.values():  # -v after the command as well: `dtbench run -v ...`
        command.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command == "data" and not any(e.startswith("-") for e in extra):
        args.tasks = [*args.tasks, *extra]  # `data export-images --task T DIR`: DIR after the options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    for chatty in CHATTY_LOGGERS:
        logging.getLogger(chatty).setLevel(logging.WARNING)
    stop_on_signals()
    try:
        if getattr(args, "mlflow", None) is not None:
            from bench.sweep import tracking

            args.mlflow = tracking.tracking_uri(args.mlflow)
        return args.func(args)
    except SpecError as exc:
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except StoreError as exc:  # the run's row, printed: nothing measured is lost
        print(f"error: {exc}\n{exc.line}", file=sys.stderr)
        return 1
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        resume = "; `bench sweep --resume` goes on from the rows recorded" if args.command == "sweep" else ""
        where = exc.filename or getattr(args, "out", None) or "the results"
        print(f"error: {one_line(f'{exc.strerror} writing {where}')}: free space there or pass --out elsewhere"
              f"{resume}", file=sys.stderr)
        return 1
    except Interrupted as stop:
        if stop.rows and getattr(args, "out", None):
            commands.finish_stopped(stop.rows, args)
        resume = " (`bench sweep --resume` runs what is left)" if args.func is commands.cmd_sweep else ""
        in_flight = ", the run in flight killed and recorded as interrupted" if stop.run_id else ""
        print(f"\n{stop}: {sum(r.status != Status.INTERRUPTED for r in stop.rows)} runs finished{in_flight}{resume}",
              file=sys.stderr)
        return stop.exit_code


if __name__ == "__main__":
    sys.exit(main())
