"""The commands that read results folders: `bench report`, `bench compare` (several machines) and `bench
project` (to more devices)."""
from __future__ import annotations

from pathlib import Path

from bench import metrics
from bench.commands.common import print_verdict
from bench.request import Request
from bench.spec.task import SpecError


def cmd_report(args: Request) -> int:
    from bench.report import report
    from bench.analysis.folder import Folder

    results = Folder.read(args.dir, metrics.settings(args))
    if not results.rows:
        raise SpecError(f"{args.dir} holds no rows ({args.dir / 'results.jsonl'} is missing, empty or torn): name the "
                        "folder a sweep wrote, or run `bench sweep --out DIR` first")
    path = report.write_report(results)
    print(path.read_text())
    print_verdict(results)
    return 0


def cmd_compare(args: Request) -> int:
    """Several machines' results folders side by side (bench.compare): compare.md and compare.html."""
    folders = [Path(d) for d in args.dirs]
    from bench import compare

    path = compare.write(folders, args.out, args.prices)
    print(path.read_text())
    print(f"written to {path} and {path.with_suffix('.html')}")
    return 0


def cmd_project(args: Request) -> int:
    """`bench project DIR`: the projected table (bench.projection.project) and DIR/projection.png."""
    from bench.projection import networks, project
    from bench.analysis.folder import Folder
    from bench.projection.projection import Link

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
