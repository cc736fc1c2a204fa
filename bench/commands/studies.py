"""The commands that answer a question about the harness or the machine: `bench regress` (did a change slow
training down?), `bench overhead` (the harness against a plain loop), `bench audit` (the fast path's switches) and
`bench gpu-check` (a lent GPU machine's one check)."""
from __future__ import annotations

import shlex
from pathlib import Path

from bench import request
from bench.request import Request
from bench.spec import devices
from bench.spec import frameworks
from bench.spec.task import SpecError


def cmd_regress(args: Request) -> int:
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
    else:  # --baseline and --current: the request's check refuses a request without them
        baseline, current, paired = Path(args.baseline), Path(args.current), args.duets
    # Runs of one --against are partners by construction; stored files must show that they are.
    code, text = compare.judge(baseline, current, paired, args.threshold, args.alpha, args.accuracy_tolerance, out,
                               check_pairs=not args.against)
    print(text)
    return code


def cmd_overhead(args: Request) -> int:
    if args.of == "sampler":
        from bench.studies import sampler_overhead

        return sampler_overhead.main(args)
    from bench.studies import overhead

    machine = devices.discover()
    device_type = request.device_type(args, machine)
    return overhead.main(args, request.task_from(args, device_type, machine), device_type)


def cmd_audit(args: Request) -> int:
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


def cmd_gpu_check(args: Request) -> int:
    from bench.studies import gpu_check

    return gpu_check.main(args)
