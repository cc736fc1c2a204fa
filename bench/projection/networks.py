"""Named links for `bench project --within-node NAME` and `--network NAME`: the NVLink of an 8-GPU box, and the
fabric between nodes, each with where its figures come from.

α is each collective's ring latency at 2 ranks as NCCL's own tuning model reckons it (src/graph/tuning.cc,
ncclTunerConstantsDefaults, NVIDIA/nccl master of 2026-06): the Ring/Simple base latency, 8.4 µs, plus the
hardware's latency for each of the ring's steps (an all-reduce's 2, an all-gather's or a reduce-scatter's 1),
3.4 µs a step over NVLink and 14.0 µs over the network. Bandwidth is what NCCL's model
takes the link to carry (NVLink: its per-link figure in src/graph/topo.h times the GPU's links; a NIC: its line
rate, times the NICs of a node, one ring a NIC), except for the A100 box, where a measured figure is published.
A model's bandwidth is an upper bound: nccl-tests measure below it (230 against 240 GB/s on the A100 box).
Measure your own link with `bench collectives` (--between-nodes) where you can."""
from __future__ import annotations

from dataclasses import dataclass

from bench.projection.projection import BUS_FACTOR, Link
from bench.spec.task import SpecError

BASE_US = 8.4  # NCCL's Ring/Simple base latency
STEPS = {"all_reduce": 2, "all_gather": 1, "reduce_scatter": 1}  # a ring's steps at 2 ranks: 2(n-1), n-1, n-1


@dataclass(frozen=True)
class Network:
    name: str
    what: str
    step_us: float  # NCCL's per-step hardware latency of the link
    busbw_gbps: float
    bandwidth_source: str
    devices_per_node: int | None = None  # within a node: the devices its links join

    @property
    def source(self) -> str:
        return (f"{self.what}: busbw {self.bandwidth_source}; α NCCL's tuning model (NVIDIA/nccl src/graph/tuning.cc, "
                f"Ring/Simple: {BASE_US} µs + {self.step_us} µs a step)")

    def links(self) -> dict[str, Link]:
        """Each collective's link at 2 ranks: NCCL's latency for its steps, the link's bandwidth."""
        return {c: Link((BASE_US + STEPS[c] * self.step_us) * 1e-6, self.busbw_gbps * 1e9) for c in BUS_FACTOR}


WITHIN_NODE = {n.name: n for n in (
    Network("nvlink-a100", "8x A100 SXM4 through NVSwitch", 3.4, 230.0,
            "230 GB/s measured by nccl-tests (NCCL's maintainer, NVIDIA/nccl-tests issue 149); NCCL's model "
            "caps it at 235", devices_per_node=8),
    Network("nvlink-h100", "8x H100 SXM5 through NVSwitch", 3.4, 370.8,
            "NCCL's 20.6 GB/s an NVLink (src/graph/topo.h, SM90_NVLINK_BW) x the H100 SXM5's 18 NVLinks (its "
            "datasheet: 900 GB/s both ways); NVLink SHARP, which NCCL uses where it can, is not modelled",
            devices_per_node=8),
)}

BETWEEN_NODES = {n.name: n for n in (
    Network("ib-8x400g", "8 InfiniBand NDR NICs a node (DGX H100: 8x ConnectX-7)", 14.0, 400.0,
            "8 x 400 Gb/s line rate, one ring a NIC"),
    Network("ib-8x200g", "8 InfiniBand HDR NICs a node (DGX A100: 8x ConnectX-6)", 14.0, 200.0,
            "8 x 200 Gb/s line rate, one ring a NIC"),
    Network("ethernet-100g", "one 100 GbE NIC a node", 14.0, 12.5, "100 Gb/s line rate"),
    Network("ethernet-25g", "one 25 GbE NIC a node", 14.0, 3.125, "25 Gb/s line rate"),
)}


def named(name: str, presets: dict[str, Network], option: str) -> Network:
    if name not in presets:
        yours = ("--between-nodes DIR as measured, or --alpha-us/--busbw-gbps" if presets is BETWEEN_NODES else
                 "or leave it out: the links the sweep measured")
        raise SpecError(f"{option} {name!r}: one of {', '.join(presets)} ({yours})")
    return presets[name]
