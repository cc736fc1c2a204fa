"""The function API and one adapter per engine (Ray, Spark, Dask, torchrun's own machinery).

    from bench import engines
    values = engines.run(fn, 3, devices=2, engine="dask")   # every rank's fn(3)

Each adapter module has `run(group, fn, args, kwargs, address, work)` -> every rank's value: it
starts (or joins) its cluster, runs `bench.engines.api.rank_main` once per rank, stops the other
ranks when one fails, and shuts down whatever it started.
"""
from bench.engines.api import RankFailed, run

__all__ = ["RankFailed", "run"]
