"""How close to the hardware: achieved TFLOP/s (all devices), MFU against the data-sheet dense peak, and the
fraction of the peak `bench peak` measured on this machine, each from the folded throughput."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from bench.metrics import Column, Context, Metric, present
from bench.results import peak, utilisation
from bench.spec.peaks import dense_peak


def _value(figure) -> float | None:
    return float(figure) if present(figure) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def derive(folded: pd.DataFrame, context: Context) -> None:
    records = folded.to_dict("records")
    folded["achieved_tflops"] = [utilisation.tflops(_value(r["flops_per_sample"]), _value(r["throughput"]))
                                 for r in records]
    folded["mfu"] = [utilisation.fraction(_value(r["flops_per_sample"]), r["per_device_throughput"],
                                          dense_peak(_text(r["device_name"]), _text(r["matmul_precision"])))
                     for r in records]
    if context.peaks is not None:
        folded["peak_fraction"] = [peak.fraction_of({k: _value(v) if isinstance(v, float) else v
                                                     for k, v in r.items()}, context.peaks) for r in records]


METRIC = Metric("utilisation", columns=(
    Column("TFLOP/s", "achieved_tflops", ".3g", True),
    Column("MFU", "mfu", ".1%", True),
    Column("of meas. peak", "peak_fraction", ".1%", True),
), derive=derive)
