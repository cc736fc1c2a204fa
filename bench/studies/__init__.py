"""Studies built on runs: each launches the harness's runs (bench.run.execute) to answer one question about the
machine or the harness, rather than to rank approaches.

- audit: the fast-path audit, each framework's switches on and off on this machine (once per machine, cached).
- microbench: the matmul peak of one device slot and the all-reduce at each topology; what a sweep's rows are held to.
- maxbatch: the largest batch an approach trains on a device count (`bench maxbatch`).
- overhead: the harness against each framework's plain loop (`bench overhead`).
- sampler_overhead: what the time-series sampler costs a run (`bench overhead --of sampler`).
"""
