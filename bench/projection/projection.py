"""The arithmetic of projecting a synchronous approach to other device counts from what one sweep measured
(`bench project`, bench.projection.project; its error against runs across shaped links: benchmarks/projection_check.py).

A step at N devices = compute (measured) + the part of the approach's communication at N that the backward pass
does not hide. The communication is the collectives the approach issues each step, with the volumes the ZeRO
paper counts (Rajbhandari et al., 2020, section 7) for Ψ bytes of gradients (the parameters' bytes):

- DDP: one all-reduce of Ψ (a reduce-scatter and an all-gather: 2Ψ on the wire);
- ZeRO-1 and ZeRO-2: a reduce-scatter of the gradients and an all-gather of the updated parameters (2Ψ);
- ZeRO-3 and FSDP: an all-gather of the parameters in the forward and again in the backward, and a
  reduce-scatter of the gradients (3Ψ), each in one collective per sharded unit (its latency paid per unit).

Each collective's time comes from its α–β fit (bench.results.collectives.Fit, or a `Link` the user names):
t = α + size x bus factor(N) / busbw. The share of it hidden behind the backward pass is measured where the
approach ran on several devices: hidden = 1 - (step - compute) / predicted communication, held in [0, 1].
"""
from __future__ import annotations

from dataclasses import dataclass

from bench.spec.collectives import BUS_FACTOR

# Per approach kind: the collectives of one step, as (collective, times per step, paid once per sharded unit).
TRAFFIC = {
    "ddp": (("all_reduce", 1, False),),
    "zero-1": (("reduce_scatter", 1, False), ("all_gather", 1, False)),
    "zero-2": (("reduce_scatter", 1, False), ("all_gather", 1, False)),
    "zero-3": (("all_gather", 2, True), ("reduce_scatter", 1, True)),
    "fsdp": (("all_gather", 2, True), ("reduce_scatter", 1, True)),
}


@dataclass(frozen=True)
class Link:
    """One collective's latency and bus bandwidth on some network (a fit, a preset or the user's)."""
    alpha_s: float
    busbw: float  # bytes/s

    def seconds(self, collective: str, size_bytes: float, world_size: int) -> float:
        if world_size < 2:
            return 0.0
        return self.alpha_s + size_bytes * BUS_FACTOR[collective](world_size) / self.busbw


def wire_bytes(kind: str, grad_bytes: float, world_size: int) -> float:
    """The bytes each rank sends a step (ring algorithms): 2Ψ(N-1)/N for DDP and ZeRO-1/2, 3Ψ(N-1)/N for ZeRO-3
    and FSDP."""
    return sum(times * grad_bytes * BUS_FACTOR[collective](world_size) for collective, times, _ in TRAFFIC[kind])


def communication_s(kind: str, grad_bytes: float, world_size: int, links: dict[str, Link], units: int = 1) -> float:
    """The approach's collectives of one step at `world_size`, each on its link (`links`: collective -> Link);
    a sharded approach issues each of its collectives once per unit (FSDP's wrapped blocks): the latency paid
    `units` times, the bytes once."""
    if world_size < 2:
        return 0.0
    total = 0.0
    for collective, times, per_unit in TRAFFIC[kind]:
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
