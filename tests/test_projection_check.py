"""benchmarks/projection_check.py's scoring: held out by construction (issue 75)."""
import importlib.util
import sys
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("projection_check", Path("benchmarks/projection_check.py"))
check = sys.modules["projection_check"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def point(model, rate, series, predicted, measured, kind="ddp", spread=0.01, split=None):
    line = {"model": model, "rate": rate, "series": series, "kind": kind, "predicted": predicted,
            "predicted_low": predicted * 0.9, "predicted_high": predicted * 1.1, "measured": measured,
            "measured_low": measured * (1 - spread), "measured_high": measured * (1 + spread),
            "error": predicted / measured - 1, "link_busbw_gbps": 0.01, "exposed_fraction": 0.5}
    return {**line, "split": split} if split else line


def test_the_widening_is_fitted_on_the_named_points_and_every_figure_scored_on_the_others():
    lines = [point("small", "50mbit", "ddp", 105, 100), point("small", "50mbit", "fsdp", 80, 100, "fsdp"),
             point("big", "50mbit", "ddp", 110, 100), point("big", "50mbit", "fsdp", 50, 60, "fsdp"),
             point("earlier", "200mbit", "ddp", 300, 100, split="fitted")]
    scored = check.score(lines, {"small"})
    assert [line["split"] for line in lines] == ["fitted", "fitted", "held-out", "held-out", "fitted"]
    assert scored["fitted_models"] == ["earlier", "small"] and scored["held_out_models"] == ["big"]
    assert scored["fitted_worst_error"] == pytest.approx(2.0)  # the earlier check's +200 % is fitted too
    assert scored["held_out_mape"] == pytest.approx((0.10 + 1 / 6) / 2)
    assert scored["held_out_worst"] == pytest.approx(1 / 6)
    assert scored["held_out_worst_by_kind"] == pytest.approx({"ddp": 0.10, "fsdp": 1 / 6})
    assert list(scored["per_rate"]) == ["50mbit"]  # a rate with no held-out point is not scored
    assert scored["per_rate"]["50mbit"]["order_kept"] == {"big": True}


def test_the_order_is_kept_unless_two_approaches_measured_apart_are_projected_the_other_way():
    apart = [point("m", "r", "a", 120, 100), point("m", "r", "b", 100, 80)]
    assert check.order_kept(apart) is True
    flipped = [point("m", "r", "a", 100, 100), point("m", "r", "b", 120, 80)]
    assert check.order_kept(flipped) is False
    within = [point("m", "r", "a", 100, 100, spread=0.1), point("m", "r", "b", 120, 105, spread=0.1)]
    assert check.order_kept(within) is True  # measured intervals overlap: either order is kept
    assert check.order_kept(apart[:1]) is None
