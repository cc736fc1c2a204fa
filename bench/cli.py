"""`dtbench` (or `python -m bench`): its options (list, run, sweep, maxbatch, peak, report, compare, data, regress,
history, overhead, audit, gpu-check), parsed and handed to the command (bench.commands); a bad request is one line and exit 2."""
from __future__ import annotations

import argparse
import errno
import logging
import sys

import bench
from bench import commands, request
from bench.interrupt import Interrupted, stop_on_signals
from bench.request import settings as layers
from bench.request.layout import COMMANDS, settings_of
from bench.results.store import StoreError
from bench.spec.setting import add_arguments, declared
from bench.spec.task import SpecError
from bench.status import Status

log = logging.getLogger("bench")
# Kept to warnings under -v: where they found credentials, each call; every font's score while a figure is drawn.
CHATTY_LOGGERS = ("botocore", "boto3", "s3transfer", "urllib3", "matplotlib")
DEFAULT_OUT = layers.DEFAULT_OUT


def one_line(message: str) -> str:
    """An error as one printable line: a value given with a newline or a carriage return shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


class Parser(argparse.ArgumentParser):
    def error(self, message: str):
        super().error(one_line(message))


def build_parser() -> argparse.ArgumentParser:
    """The command line, generated from the settings' fields: each command's layers in order, -v on each."""
    parser = Parser(prog=bench.command(), description=__doc__)
    add_arguments(parser, [*declared(layers.Logging), *declared(layers.Version)], "")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.description)
        for layer in command.layers:
            add_arguments(p, settings_of(layer), name)
        add_arguments(p, declared(layers.Logging), name, suppress_defaults=True)  # `dtbench run -v ...` too
        p.set_defaults(func=getattr(commands, command.run))
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
    run, args = args.func, request.Request.parsed(args)
    try:
        if getattr(args, "mlflow", None) is not None:
            from bench.sweep import tracking

            args = args.replace(mlflow=tracking.tracking_uri(args.mlflow))
        return run(args.check())
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
        resume = " (`bench sweep --resume` runs what is left)" if run is commands.cmd_sweep else ""
        in_flight = ", the run in flight killed and recorded as interrupted" if stop.run_id else ""
        print(f"\n{stop}: {sum(r.status != Status.INTERRUPTED for r in stop.rows)} runs finished{in_flight}{resume}",
              file=sys.stderr)
        return stop.exit_code


if __name__ == "__main__":
    sys.exit(main())
