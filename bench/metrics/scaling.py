"""Scaling efficiency: throughput on N devices over N times the same configuration's on one device, and over N
times the framework's plain single-device loop (its baseline variant) - the one rule of bench.results.key; and
what gradient synchronisation costs a configuration, against its no-sync twin."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from bench.metrics import Column, Context, Metric, present
from bench.results.key import RunKey, efficiencies
from bench.spec.variants import VARIANTS


def single_variant(key: RunKey) -> str | None:
    """The framework's plain single-device loop that this variant is also held to."""
    variant = VARIANTS.get(key.variant)
    return variant.baseline if variant else None


def one_device_throughputs(folded: pd.DataFrame) -> dict[RunKey, float]:
    """The baselines: each one-device, gradients-synchronised configuration's (folded) throughput."""
    if folded.empty:
        return {}
    return {k: t for k, t, ok in zip(folded["key"], folded["throughput"], folded["ok"])
            if ok and k.world_size == 1 and not k.independent}


def derive(folded: pd.DataFrame, context: Context) -> None:
    one_device = one_device_throughputs(folded)
    scaling = [efficiencies(k, t, one_device, single_variant(k)) if ok else (None, None)
               for k, t, ok in zip(folded["key"], folded["throughput"], folded["ok"])]
    folded["scaling_efficiency"] = [own for own, _ in scaling]
    folded["scaling_efficiency_vs_single"] = [single for _, single in scaling]


# The input phases' exposed communication as the configurations frame holds it (the row's input_phases).
PHASES_COMMUNICATION = "input_phases.communication.cost"


def communication_cost(line: dict, no_sync: dict | None) -> float | None:
    """What gradient synchronisation costs the throughput: the run's own phases where it ran them (the same
    batches trained with the sync off a window before), else 1 - throughput / its no-sync twin's."""
    if present(line.get(PHASES_COMMUNICATION)):
        return line[PHASES_COMMUNICATION]
    return 1 - line["throughput"] / no_sync["throughput"] if no_sync else None


def communication_cell(cost: float | None) -> str:
    if cost is None:
        return "-"
    # A no-sync run slower than its synced twin: run-to-run noise exceeds the communication cost.
    return f"{100 * cost:.0f}%" + (" (noise)" if cost < 0 else "")


def fact(winner: dict) -> str | None:
    efficiency = winner.get("scaling_efficiency")
    return f"scaling efficiency {efficiency:.2f}" if present(efficiency) else None


EFFICIENCIES = ("scaling_efficiency", "scaling_efficiency_vs_single")
METRIC = Metric("scaling", figures=EFFICIENCIES, derived=EFFICIENCIES, columns=(
    Column("scaling eff.", "scaling_efficiency", ".2f", True),
    Column("eff. vs single", "scaling_efficiency_vs_single", ".2f", True),
), derive=derive, fact=fact)
