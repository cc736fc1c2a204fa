"""Functions the engine tests hand to `bench.engines.api.run`: importable by every engine's workers."""
from __future__ import annotations

import os


def rank_report(offset: int, scale: float = 1.0) -> dict:
    """What this rank sees of the group, and a sum over it (proves the group really exists)."""
    import torch
    import torch.distributed as dist

    total = torch.tensor([float(dist.get_rank() + offset)])
    dist.all_reduce(total)
    return {"rank": dist.get_rank(), "world": dist.get_world_size(), "backend": dist.get_backend(),
            "env_rank": int(os.environ["RANK"]), "sum": total.item() * scale}


def fail_on_rank_one() -> int:
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("rank one was told to fail")
    dist.barrier()  # rank 0 waits here for a peer that will never come: the engine must not hang
    return 0


def fail_on_rank_one_then_zero() -> int:
    """Rank 1 fails, and rank 0 a moment later, as a peer whose collective broke would."""
    import time

    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("rank one was told to fail")
    time.sleep(0.05)
    raise RuntimeError("rank zero failed only because rank one did")


def kill_rank_one() -> int:
    """Rank 1 dies without raising (as the OOM killer would end it); rank 0's barrier breaks and raises."""
    import signal

    import torch.distributed as dist

    if dist.get_rank() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    dist.barrier()
    return 0


if __name__ == "__main__":  # python -m tests.engine_functions ENGINE report|fail|fail-both|kill: one API call, JSON out
    import json
    import sys

    from bench import engines
    # Imported, not taken from __main__: pickled by reference.
    from tests.engine_functions import fail_on_rank_one, fail_on_rank_one_then_zero, kill_rank_one, rank_report

    engine, what = sys.argv[1], sys.argv[2]
    try:
        if what == "report":
            values = engines.run(rank_report, 10, devices=2, engine=engine, timeout_s=120, scale=2.0)
        else:
            failing = {"fail": fail_on_rank_one, "fail-both": fail_on_rank_one_then_zero, "kill": kill_rank_one}[what]
            values = engines.run(failing, devices=2, engine=engine, timeout_s=120)
    except engines.RankFailed as exc:
        print(json.dumps({"rank": exc.rank, "error": str(exc)}))
        sys.exit(3)
    print(json.dumps({"values": values}))
