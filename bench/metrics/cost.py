"""Cost: what training costs at a price per device-hour (`--price-per-device-hour USD`: a cloud GPU's hourly
rate, or a CPU slot's share of its machine's): per million training samples at the measured throughput, and per
epoch of the task's training set. Shown, and told by the verdict, only when a price is given."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from bench.metrics import Column, Context, Metric, present
from bench.spec.setting import Setting
from bench.results.frame import records_of

if TYPE_CHECKING:
    import pandas as pd

PRICE = "price_per_device_hour"


def samples_per_epoch(line: dict) -> float | None:
    """The training samples of one epoch, as the run counted them (its first evaluated epoch)."""
    epochs = line.get("curves.epochs")
    if not isinstance(epochs, list) or not epochs:
        return None
    epoch, samples = epochs[0][0], epochs[0][1]
    return samples / epoch if epoch else None


def price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: give what one device costs an hour, in USD, above 0")
    return value


def money(amount: float) -> str:
    """Dollars to three significant figures below a dollar, cents above (a CPU slot's cost per million samples is
    a fraction of a cent)."""
    return f"{amount:,.2f}" if amount >= 1 else f"{amount:.3g}"


def cell(name: str):
    return lambda line: money(line[name]) if present(line.get(name)) else "-"


def derive(folded: pd.DataFrame, context: Context) -> None:
    hourly = context.settings.get(PRICE)
    if hourly is None:
        return
    records = records_of(folded)
    per_sample = [hourly * r["world_size"] / 3600 / r["throughput"] if r["ok"] and present(r["throughput"]) else None
                  for r in records]
    folded[PRICE] = hourly
    folded["cost_per_million_samples"] = [c * 1e6 if c is not None else None for c in per_sample]
    folded["cost_per_epoch"] = [c * n if c is not None and (n := samples_per_epoch(r)) else None
                                for c, r in zip(per_sample, records)]


def fact(winner: dict) -> str | None:
    cost = winner.get("cost_per_million_samples")
    if not present(cost):
        return None
    return f"${money(cost)} per million samples at ${winner[PRICE]:g} a device-hour"


METRIC = Metric("cost", columns=(
    Column("$ / M samples", "cost_per_million_samples", "", False, cell=cell("cost_per_million_samples")),
    Column("$ / epoch", "cost_per_epoch", "", False, cell=cell("cost_per_epoch")),
), derive=derive, fact=fact, options=(
    Setting("what one device (a GPU, or a CPU slot) costs an hour: each configuration's cost per million training "
            "samples and per epoch, in the table and the verdict", option="--price-per-device-hour", dest=PRICE,
            type=price, metavar="USD", default=None),
))
