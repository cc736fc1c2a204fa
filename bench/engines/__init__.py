"""One adapter per engine: `run(group, fn, args, kwargs, address, work)` -> every rank's value.

Each starts (or joins) its cluster, runs `bench.distributed.rank_main` once per rank, stops the
other ranks when one fails, and shuts down whatever it started.
"""
