"""The microbenchmarks that explain the runs, each launched like a run of its own (same pinning,
launcher and clean-up) and appended to a JSON-lines table in the results folder: the collectives, per backend and
topology (the all-reduce in `allreduce.jsonl`, all-gather and reduce-scatter in `collectives.jsonl`), and the
device's matmul peak (`peak.jsonl`, per precision on one device slot). bench.analysis reads the tables."""
from __future__ import annotations

import logging
from datetime import datetime, timezone
from pathlib import Path

from bench.results import ResultRow, ResultStore, collectives, peak
from bench.results.jsonl import append_line
from bench.run.execute import start_and_wait
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.spec.rank_record import Collectives, Peak, Record
from bench.spec.task import get_task
from bench.spec.variants import Variant, probed_collectives
from bench.status import Status

log = logging.getLogger(__name__)

COLLECTIVES = Variant("collectives", "torch", "torch", "torch_impl.launch:TORCHRUN", "probes.collectives",
                      single_process=False, spans_nodes=True,
                      summary="all-reduce, all-gather and reduce-scatter microbenchmark")
PEAK = Variant("peak", "torch", "torch", "bench.run.launch:PYTHON", "probes.peak", single_process=True,
               spans_nodes=False, summary="matmul peak microbenchmark")


def measure_collectives(out_dir: Path, machine: Machine, device_type: str, nodes: int, devices_per_node: int,
                        timeout_s: float = 300, **across_hosts) -> list[dict] | None:
    """All-reduce, all-gather and reduce-scatter on one topology; the all-reduce's rows appended to
    OUT/allreduce.jsonl, the others' to OUT/collectives.jsonl; all of them returned (none where it failed).
    `across_hosts`: a real multi-host measurement's RunSpec fields (host_node, master_addr, master_port,
    interface); node 0's host keeps the rows, another node's returns [] where its share ran, None where not."""
    spec = RunSpec(COLLECTIVES, get_task("quick"), device_type, nodes, devices_per_node, timeout_s=timeout_s,
                   **across_hosts)
    if spec.host_node not in (None, 0):
        launched = start_and_wait(spec, out_dir, machine, data_path=None)
        if launched.status != Status.OK:
            log.warning("node %d's share of the collectives failed: %s", spec.host_node,
                        (launched.reason or "no reason recorded").splitlines()[0])
            return None
        return []
    event = run(spec, Collectives, out_dir, machine)
    if event is None:
        return []
    rows = [{"backend": event.backend, "device_type": device_type, "nodes": nodes,
             "devices_per_node": devices_per_node, "world_size": spec.world_size, **r} for r in event.results]
    reduced = [r for r in rows if r["collective"] == "all_reduce"]
    return (append(out_dir / "allreduce.jsonl", reduced)
            + append(out_dir / collectives.FILE, [r for r in rows if r["collective"] != "all_reduce"]))


def measure_peak(out_dir: Path, machine: Machine, device_type: str, cores_per_slot: int = 1,
                 timeout_s: float = 300) -> list[dict]:
    """The matmul peak of one device slot; a row per precision appended to OUT/peak.jsonl and returned."""
    spec = RunSpec(PEAK, get_task("quick"), device_type, cores_per_slot=cores_per_slot, timeout_s=timeout_s)
    event = run(spec, Peak, out_dir, machine)
    if event is None:
        return []
    return append(out_dir / "peak.jsonl", [
        {"device_type": event.device_type, "device_name": event.device_name, "threads": event.threads, **r}
        for r in event.results])


def run(spec: RunSpec, kind: type[Record], out_dir: Path, machine: Machine) -> Record | None:
    """Launch it like a training run (same pinning, launcher, clean-up); rank 0's first record of `kind`, or
    None (with a warning) when it failed."""
    launched = start_and_wait(spec, out_dir, machine, data_path=None)
    events = [r for r in launched.records.get(0, []) if isinstance(r, kind)]
    if launched.status != Status.OK or not events:
        log.warning("%s benchmark %s failed: %s", kind.EVENT, spec.key.label,
                    (launched.reason or "no result").splitlines()[0])
        return None
    return events[0]


def append(path: Path, rows: list[dict]) -> list[dict]:
    """Append rows (stamped with the time) to a JSON-lines table; return them."""
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows = [{"started_at": stamp, **r} for r in rows]
    for row in rows:
        append_line(path, row)
    return rows


def peak_for_sweep(out_dir: Path, machine: Machine, device_type: str, cores_per_slot: int, again: bool = True) -> None:
    """The matmul peak of one device slot, measured now: the rows of the sweep are held to it
    (a resumed sweep keeps the one measured before)."""
    if not again and any(r["device_type"] == device_type and r.get("threads") == cores_per_slot
                         for r in peak.load(out_dir)):
        return
    log.info("matmul peak microbenchmark: %s", device_type)
    measure_peak(out_dir, machine, device_type, cores_per_slot)


def communication_for_sweep(rows: list[ResultRow], out_dir: Path, machine: Machine, again: bool = True) -> None:
    """The collective microbenchmarks on every multi-device topology the torch backends ran on (a resumed
    sweep: on those the folder has rows for and no measurement yet)."""
    if not again:
        rows = ResultStore(out_dir).rows()
    # Measured: every collective on that topology (a folder from before all-gather and reduce-scatter has only the
    # all-reduce, and is measured again).
    found: dict[tuple, set] = {}
    for r in collectives.load(out_dir):
        found.setdefault((r["device_type"], r["nodes"], r["devices_per_node"]), set()).add(r["collective"])
    measured = {topology for topology, kinds in found.items() if kinds >= set(collectives.BUS_FACTOR)}
    topologies = sorted({(r.device_type, r.nodes, r.devices_per_node) for r in rows
                         if r.status == Status.OK and r.world_size > 1 and r.framework in probed_collectives()}
                        - (set() if again else measured))
    for device_type, nodes, per_node in topologies:
        log.info("collective microbenchmarks: %s %dx%d", device_type, nodes, per_node)
        measure_collectives(out_dir, machine, device_type, nodes, per_node)
