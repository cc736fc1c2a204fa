"""The collectives the microbenchmarks time and a projection counts, with nccl-tests' bus factor of each: the
share of a message each rank's link carries on a ring of n ranks (busbw = algbw x factor). Shared by the probe,
which runs inside the ranks, and the harness, which fits and projects."""

BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
