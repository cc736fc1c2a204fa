"""The commands that read results folders: `bench report`, `bench compare` (several machines) and `bench
project` (to more devices)."""
from __future__ import annotations

import argparse
from pathlib import Path

from bench import command, metrics
from bench.commands.common import print_verdict
from bench.spec.task import SpecError


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
