"""The projection's arithmetic (bench.analysis.projection) against figures worked by hand."""
import pytest

from bench.analysis import projection
from bench.analysis.projection import Link

PSI = 100e6  # bytes of gradients (25 M fp32 parameters)


def test_wire_bytes_are_the_zero_papers_volumes():
    # 2Ψ for DDP and ZeRO-1/2, 3Ψ for ZeRO-3 and FSDP, each times (N-1)/N on a ring.
    assert projection.wire_bytes("ddp", PSI, 8) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("zero-1", PSI, 8) == pytest.approx(2 * PSI * 7 / 8)
    assert projection.wire_bytes("zero-2", PSI, 4) == pytest.approx(2 * PSI * 3 / 4)
    assert projection.wire_bytes("zero-3", PSI, 8) == pytest.approx(3 * PSI * 7 / 8)
    assert projection.wire_bytes("fsdp", PSI, 2) == pytest.approx(3 * PSI / 2)


def test_communication_time_from_each_collectives_alpha_and_beta():
    links = {"all_reduce": Link(50e-6, 10e9), "all_gather": Link(20e-6, 12e9), "reduce_scatter": Link(30e-6, 8e9)}
    # DDP on 8: 50 µs + 100 MB x 2 x 7/8 / 10 GB/s = 0.00005 + 0.0175 s
    assert projection.communication_s("ddp", PSI, 8, links) == pytest.approx(50e-6 + 0.0175)
    # ZeRO-2 on 4: reduce-scatter 30 µs + 100 MB x 3/4 / 8 GB/s, all-gather 20 µs + 100 MB x 3/4 / 12 GB/s
    assert projection.communication_s("zero-2", PSI, 4, links) == pytest.approx(
        30e-6 + 75e6 / 8e9 + 20e-6 + 75e6 / 12e9)
    # FSDP on 2 with 10 units: two all-gathers and a reduce-scatter, each paying its latency per unit
    assert projection.communication_s("fsdp", PSI, 2, links, units=10) == pytest.approx(
        2 * (10 * 20e-6 + 50e6 / 12e9) + (10 * 30e-6 + 50e6 / 8e9))
    assert projection.communication_s("ddp", PSI, 1, links) == 0.0


def test_overlap_measured_at_two_devices_carries_to_more():
    link = {"all_reduce": Link(0.0, 1e9)}
    at_two = projection.communication_s("ddp", PSI, 2, link)  # 100 MB x 1 / 1 GB/s = 0.1 s
    assert at_two == pytest.approx(0.1)
    # Measured: compute 0.30 s, step at 2 devices 0.34 s: 0.04 of the predicted 0.1 s showed, 60 % hidden.
    hidden = projection.hidden_share(0.34, 0.30, at_two)
    assert hidden == pytest.approx(0.6)
    at_eight = projection.communication_s("ddp", PSI, 8, link)  # 100 MB x 2 x 7/8 = 0.175 s
    assert projection.step_s(0.30, at_eight, hidden) == pytest.approx(0.30 + 0.4 * 0.175)
    assert projection.hidden_share(0.29, 0.30, at_two) == 1.0  # faster than compute: all hidden, no more
    assert projection.hidden_share(0.60, 0.30, at_two) == 0.0  # more exposed than predicted: none hidden


def test_model_state_per_rank_shards_as_each_kind_does():
    parts = {"parameters": 100.0, "gradients": 100.0, "optimizer": 200.0, "master_weights": 0.0}
    assert projection.model_state_bytes("ddp", parts, 8) == 400.0
    assert projection.model_state_bytes("zero-1", parts, 8) == 100 + 100 + 200 / 8
    assert projection.model_state_bytes("zero-2", parts, 8) == 100 + 300 / 8
    assert projection.model_state_bytes("fsdp", parts, 8) == 400 / 8
    assert projection.model_state_bytes("zero-3", {**parts, "master_weights": 100.0}, 4) == 500 / 4
