"""Where a multi-device configuration's step time goes: its compute-only twin (gradient synchronisation off), the
communication it leaves exposed (from that twin, else from the profile), how much of the all-reduce the compute
hides, and the all-reduce floor the microbenchmark sets for its gradients."""
from __future__ import annotations

import pandas as pd

from bench.analysis.profiles import unprofiled_scale
from bench.metrics import fmt, present
from bench.metrics.blocks import Block, table_section
from bench.metrics.scaling import communication_cell, communication_cost
from bench.results import allreduce
from bench.results.frame import records_of
from bench.spec.variants import probed_collectives
from bench.status import Status


def entries(configs: pd.DataFrame, microbenchmark: list[dict], profiles: dict | None = None) -> list[dict]:
    """Per multi-device run: measured step, compute-only step (its no-sync twin), communication floor, and
    the communication exposed: the step less its no-sync twin's, else (TensorFlow has no twin) the profile's
    exposed communication (bench.analysis.profiles), with how much of it the profile saw hidden. `microbenchmark`:
    the folder's all-reduce measurements (bench.results.allreduce.load)."""
    records = records_of(configs)
    no_sync = {r["key"]: r for r in records if r["independent"] and r["status"] == Status.OK}
    out = []
    for r in records:
        if r["status"] != Status.OK or r["independent"] or r["world_size"] < 2 or not present(r["step_ms"]):
            continue
        twin = no_sync.get(r["key"]._replace(independent=True))
        params = r["params"] if present(r["params"]) else None
        grad_bytes = int(params) * 4 if params else None  # gradients are fp32 (autocast keeps fp32 weights)
        busbw = (allreduce.busbw_at(microbenchmark, r["world_size"], r["nodes"], grad_bytes)
                 if grad_bytes and r["framework"] in probed_collectives() else None)
        profile = (profiles or {}).get(r["key"])
        unprofiled = unprofiled_scale(profile) if profile else None
        exposed = (r["step_ms"] - twin["step_ms"], "no-sync twin") if twin else \
            (profile["parts"]["communication"] * unprofiled, "profile") if profile else (None, None)
        floor = allreduce.communication_floor_ms(grad_bytes, r["world_size"], busbw) if grad_bytes else None
        out.append({
            "row": r, "step_ms": r["step_ms"], "compute_ms": twin["step_ms"] if twin else None,
            "exposed_ms": exposed[0], "exposed_from": exposed[1],
            "in_flight_ms": profile["in_flight_ms"] * unprofiled if profile else None,
            "overlap": profile["overlap"] if profile else None,
            "comm_cost": communication_cost(r, twin),
            "floor_ms": floor,
            "busbw_gbps": busbw / 1e9 if busbw else None, "grad_mb": grad_bytes / 2**20 if grad_bytes else None,
        })
    # No twin, profile or floor anywhere (a sweep --no-analysis): nothing to split a step into.
    return out if any(e["compute_ms"] or e["exposed_ms"] is not None or e["floor_ms"] for e in out) else []


def table(found: list[dict]) -> pd.DataFrame:
    headers = ("variant", "devices", "step ms", "compute-only ms (no sync)", "communication cost",
               "exposed communication ms", "in flight ms (profile)", "hidden (profile)",
               "all-reduce floor ms", "busbw GB/s at grad size", "gradients MiB")
    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(e["step_ms"], ".1f"), fmt(e["compute_ms"], ".1f"),
             communication_cell(e["comm_cost"]),
             f"{fmt(e['exposed_ms'], '.1f')} ({e['exposed_from']})" if e["exposed_from"] else "-",
             fmt(e["in_flight_ms"], ".1f"), fmt(e["overlap"], ".0%"), fmt(e["floor_ms"], ".2f"),
             fmt(e["busbw_gbps"], ".3f"), fmt(e["grad_mb"], ".2f")]
            for e in found]
    return pd.DataFrame(body, columns=list(headers))


def section(found: list[dict]) -> list[Block]:
    return table_section("Where the step time goes", 3, (
        "Compute-only = the same run with gradient synchronisation off; communication cost = "
        "1 - throughput / no-sync throughput (negative: the no-sync run was slower, i.e. run-to-run "
        "noise exceeded the cost; repeat the runs); exposed communication = the step less its no-sync "
        "twin's, or where there is no twin (TensorFlow) the profile's communication with nothing else "
        "running; in flight and hidden = the profile's all-reduce time and the part of it the compute "
        "covered (`--profile`; profile times scaled to the unprofiled step); all-reduce floor = gradient bytes x 2(n-1)/n / busbw from the "
        "microbenchmark below (torch backends)."), table(found) if found else None)
