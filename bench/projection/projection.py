"""The arithmetic of projecting a synchronous approach to other device counts from what one sweep measured
(`bench project`, bench.projection.project; its error against runs across shaped links: benchmarks/projection_check.py).

A step at N devices = compute (measured) + the part of the approach's communication at N that the backward pass
does not hide. The communication is the collectives the approach issues each step, with the volumes the ZeRO
paper counts (Rajbhandari et al., 2020, section 7) for Ψ bytes of gradients (the parameters' bytes):

- DDP: one all-reduce of Ψ (a reduce-scatter and an all-gather: 2Ψ on the wire);
- ZeRO-1 and ZeRO-2: a reduce-scatter of the gradients and an all-gather of the updated parameters (2Ψ);
- FSDP: an all-gather of the parameters in the forward and again in the backward, and a reduce-scatter of the
  gradients (3Ψ), each in one collective per sharded unit (its latency paid per unit);
- DeepSpeed's ZeRO-3: the paper's 3Ψ only for a model past its reuse distance. DeepSpeed does not release a
  gathered parameter that the step's trace uses again within `stage3_max_reuse_distance` elements (1e9 by default,
  which dtbench keeps; runtime/zero/partitioned_param_coordinator.py, __params_to_release), and the backward uses
  every parameter again within twice the model's elements of its forward use: a model under half that distance is
  gathered once a step, in the forward, and released at the optimizer step (2Ψ). Parameters under
  `stage3_param_persistence_threshold` (1e5 elements) are never gathered; they are counted as gathered (5 % of
  timm's resnet10t), an upper bound.

Each collective's time comes from its α–β fit (bench.results.collectives.Fit, or a `Link` the user names):
t = α + size x bus factor(N) / busbw. The share of it hidden behind the backward pass is measured where the
approach ran on several devices: hidden = 1 - (step - compute) / predicted communication, held in [0, 1].
Carried to a slower link, that share can claim more hiding than the step has room for, so the exposed
communication is never less than `unhidden_s`: what no overlap can hide (a bucket ready only as the backward
ends, communication longer than the compute it runs beside).
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.spec.collectives import BUS_FACTOR

# Per approach kind: the collectives of one step, as (collective, times per step, paid once per sharded unit).
TRAFFIC = {
    "ddp": (("all_reduce", 1, False),),
    "zero-1": (("reduce_scatter", 1, False), ("all_gather", 1, False)),
    "zero-2": (("reduce_scatter", 1, False), ("all_gather", 1, False)),
    "zero-3": (("all_gather", 1, True), ("reduce_scatter", 1, True)),  # under ZERO3_REUSE_ELEMENTS / 2
    "fsdp": (("all_gather", 2, True), ("reduce_scatter", 1, True)),
}


ZERO3_REUSE_ELEMENTS = 1e9  # DeepSpeed's stage3_max_reuse_distance default
BACKWARD_SHARE = 2 / 3  # of a step's compute: the backward's two matrix products to the forward's one (C ≈ 6N)
# PyTorch DDP's buckets (DistributedDataParallel: dist._DEFAULT_FIRST_BUCKET_BYTES, bucket_cap_mb=25), filled in
# the reverse order of the parameters; the frameworks that wrap it (Accelerate, Lightning Fabric) keep them.
DDP_BUCKETS = (2**20, 25 * 2**20)
DDP_FRAMEWORKS = ("torch", "accelerate", "lightning-fabric")


def traffic(kind: str, elements: float | None = None) -> tuple[tuple[str, int, bool], ...]:
    """TRAFFIC[kind], with ZeRO-3's second all-gather (the backward's) where the model's `elements` are past
    half DeepSpeed's reuse distance."""
    if kind == "zero-3" and elements is not None and 2 * elements > ZERO3_REUSE_ELEMENTS:
        return (("all_gather", 2, True), ("reduce_scatter", 1, True))
    return TRAFFIC[kind]


@dataclass(frozen=True)
class Link:
    """One collective's latency and bus bandwidth on some network (a fit, a preset or the user's)."""
    alpha_s: float
    busbw: float  # bytes/s

    def seconds(self, collective: str, size_bytes: float, world_size: int) -> float:
        if world_size < 2:
            return 0.0
        return self.alpha_s + size_bytes * BUS_FACTOR[collective](world_size) / self.busbw


def wire_bytes(kind: str, grad_bytes: float, world_size: int, elements: float | None = None) -> float:
    """The bytes each rank sends a step (ring algorithms): 2Ψ(N-1)/N for DDP, ZeRO-1/2 and a ZeRO-3 model within
    DeepSpeed's reuse distance, 3Ψ(N-1)/N for FSDP and a larger ZeRO-3 model."""
    return sum(times * grad_bytes * BUS_FACTOR[collective](world_size)
               for collective, times, _ in traffic(kind, elements))


def communication_s(kind: str, grad_bytes: float, world_size: int, links: dict[str, Link], units: int = 1,
                    elements: float | None = None) -> float:
    """The approach's collectives of one step at `world_size`, each on its link (`links`: collective -> Link);
    a sharded approach issues each of its collectives once per unit (FSDP's wrapped blocks): the latency paid
    `units` times, the bytes once. `elements`: the model's parameters (ZeRO-3's gathers depend on them)."""
    if world_size < 2:
        return 0.0
    total = 0.0
    for collective, times, per_unit in traffic(kind, elements):
        link = links[collective]
        latency = link.alpha_s * (units if per_unit else 1)
        total += times * (latency + grad_bytes * BUS_FACTOR[collective](world_size) / link.busbw)
    return total


def hidden_share(step_s: float, compute_s: float, predicted_comm_s: float) -> float:
    """How much of the predicted communication the measured step did not show: 1 - exposed / predicted, in
    [0, 1] (0 where nothing was predicted)."""
    if predicted_comm_s <= 0:
        return 0.0
    return min(1.0, max(0.0, 1 - (step_s - compute_s) / predicted_comm_s))


def buckets(grad_bytes: float, sizes: tuple[int, int] = DDP_BUCKETS) -> list[float]:
    """PyTorch DDP's buckets of Ψ bytes in the order they are all-reduced: the first up to `sizes[0]`, then each
    up to `sizes[1]`, the last what is left (it holds the first layers, whose gradients come last)."""
    first, cap = sizes
    out = [min(grad_bytes, first)]
    while sum(out) < grad_bytes:
        out.append(min(cap, grad_bytes - sum(out)))
    return out


def unhidden_s(kind: str, grad_bytes: float, world_size: int, links: dict[str, Link], compute_s: float,
               bucketed: bool = False, elements: float | None = None) -> float:
    """The least of the step's communication that any overlap leaves exposed, collectives running one at a time:
    - DDP's all-reduce can hide only behind the backward (BACKWARD_SHARE of the compute); with PyTorch's buckets
      (`bucketed`), the last bucket is ready only as the backward ends, so it is never hidden, and the others at
      best from the backward's start: exposed >= last + max(0, others - backward);
    - ZeRO-1/2: the reduce-scatter behind the backward at most, the all-gather of the updated parameters after the
      optimizer step never;
    - ZeRO-3 and FSDP: gathers prefetched through the forward and the backward alike, so behind the whole compute.
    Whatever the overlap measured on a faster link, a step is never shorter than its communication: throughput
    never exceeds the link-bound samples / (bytes x bus factor / busbw + latency per collective)."""
    if world_size < 2:
        return 0.0
    backward = BACKWARD_SHARE * compute_s

    def seconds(collective: str, size: float) -> float:
        return links[collective].seconds(collective, size, world_size)

    if kind == "ddp" and bucketed:
        *others, last = [seconds("all_reduce", b) for b in buckets(grad_bytes)]
        return last + max(0.0, sum(others) - backward)
    total = communication_s(kind, grad_bytes, world_size, links, elements=elements)
    if kind in ("zero-1", "zero-2"):
        gather = seconds("all_gather", grad_bytes)
        return gather + max(0.0, total - gather - backward)
    return max(0.0, total - (compute_s if kind in ("zero-3", "fsdp") else backward))


def step_s(compute_s: float, comm_s: float, hidden: float) -> float:
    return compute_s + (1 - hidden) * comm_s


SHARDED = {"ddp": (), "zero-1": ("optimizer", "master_weights"),
           "zero-2": ("gradients", "optimizer", "master_weights"),
           "zero-3": ("parameters", "gradients", "optimizer", "master_weights"),
           "fsdp": ("parameters", "gradients", "optimizer")}  # the ZeRO paper's stages


def model_state_bytes(kind: str, parts: dict[str, float], world_size: int,
                      sharded: tuple[str, ...] | None = None) -> float:
    """A rank's model state at `world_size` from one device's parts (parameters, gradients, optimizer, and
    ZeRO's fp32 master copy): the `sharded` parts divided over the ranks (as measured; by default what the kind
    shards in the ZeRO paper), the others whole."""
    divided = SHARDED[kind] if sharded is None else sharded
    return sum((size or 0.0) / (world_size if part in divided else 1) for part, size in parts.items())
