"""`python -m bench.engines.driver --spec SPEC --engine E [--address A]`: one run's ranks through an engine.

The harness starts this one process in place of the variant's launcher; it hands the variant's
training function (`Variant.engine_entry`) to `bench.engines.api.run`, and every rank reports through
`bench.worker` into the run directory exactly as under torchrun.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.engines import api
from bench.spec.rank_spec import RankSpec
from bench.spec.setting import parse, setting
from bench.spec.variants import ENGINES, get_variant


@dataclass(frozen=True)
class DriverArgs:
    spec: str = field(default="", metadata=setting(required=True))
    engine: str = field(default="", metadata=setting(required=True, choices=ENGINES))
    address: str | None = field(default=None, metadata=setting(
        "an existing cluster: Ray address, Spark master, Dask scheduler"))


def main(argv: list[str] | None = None) -> int:
    args = parse(DriverArgs, argv, __doc__)
    spec = RankSpec.load(args.spec)
    # Your own function's run names its entry in the spec (bench.sweep.function); a variant's is in the table.
    module, name = (spec.approach.get("engine_entry") or get_variant(spec.variant).engine_entry).split(":")
    train = getattr(importlib.import_module(module), name)
    try:
        api.run(train, args.spec, devices=spec.world_size, nodes=spec.nodes, engine=args.engine,
                device_type=spec.device_type, address=args.address, run_dir=Path(spec.run_dir) / "engine",
                node_gpus=[plan.cuda_visible for plan in spec.node_plans] if spec.device_type == "cuda" else None)
    except api.RankFailed as exc:
        print(f"{args.engine}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
