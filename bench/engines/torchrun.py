"""torchrun's own machinery as a function API: `elastic_launch` starts one process per rank.

The agent's rendezvous store is hosted here on a socket bound to 127.0.0.1: torchrun's agent, told
that it may use an agent store at that address (TORCHELASTIC_USE_AGENT_STORE), fails to bind its own
and joins ours as a client, so nothing listens beyond loopback.
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path

from bench.engines.api import Group, RankFailed, rank_main_from_env
from bench.spec.task import SpecError


def run(group: Group, fn, args: tuple, kwargs: dict, address: str | None, work: Path) -> list:
    if address is not None or group.nodes != 1:
        raise SpecError("the torchrun engine runs on this host only: use ray, spark or dask for a cluster, "
                        "or `bench run --node-rank` agents on every host")
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    from bench.hosts.rendezvous import loopback_store

    with loopback_store() as (port, store_env):
        saved = {k: os.environ.get(k) for k in store_env}
        os.environ.update(store_env)
        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=group.world_size,
                              run_id=uuid.uuid4().hex[:8], rdzv_backend="static",
                              rdzv_endpoint=f"127.0.0.1:{port}", rdzv_configs={"rank": 0}, max_restarts=0,
                              monitor_interval=0.5, start_method="spawn", log_line_prefix_template=None)
        try:
            returned = elastic_launch(config, rank_main_from_env)(group, fn, args, kwargs)
        except ChildFailedError as exc:
            # A rank killed by a signal first (its peers' broken collectives fail after it), then the earliest;
            # torchrun's own get_first_failure() stamps to the second and keeps the lowest rank on a tie.
            rank, failure = min(exc.failures.items(), key=lambda item: (item[1].exitcode >= 0, item[1].timestamp))
            raise RankFailed(rank, failure.message if isinstance(failure.message, str)
                             else str(failure.message)) from None
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return returned[0]
