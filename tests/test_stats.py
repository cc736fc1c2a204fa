import pytest

from bench.results import stats
from bench.results.key import scaling_efficiency


def test_median_interval_uses_order_statistics():
    values = list(range(1, 11))  # n=10: [x(2), x(9)] covers the median with 97.9 %
    low, high, coverage = stats.median_interval(values)
    assert (low, high) == (2, 9)
    assert coverage == pytest.approx(1 - 2 * 11 / 1024)


def test_too_few_windows_fall_back_to_the_range_with_its_true_coverage():
    low, high, coverage = stats.median_interval([3.0, 1.0, 2.0])
    assert (low, high) == (1.0, 3.0)
    assert coverage == pytest.approx(0.75)


def test_throughput_summary_on_fixed_windows():
    summary = stats.throughput_summary([1.0, 2.0, 0.5, 1.0, 1.0, 1.0], samples_per_window=100)
    assert summary["median"] == 100
    assert summary["windows"] == [100, 50, 200, 100, 100, 100]
    assert summary["ci_low"] <= summary["median"] <= summary["ci_high"]


def test_step_time_median_and_p90():
    result = stats.step_time_ms([1.0] * 9 + [2.0], window_steps=10)
    assert result["median"] == 100
    assert result["p90"] == pytest.approx(110)


def test_scaling_efficiency():
    assert scaling_efficiency(180.0, 2, 100.0) == pytest.approx(0.9)
    assert scaling_efficiency(180.0, 2, None) is None
