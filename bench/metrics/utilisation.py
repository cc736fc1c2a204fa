"""How close to the hardware: achieved TFLOP/s (all devices), MFU against the data-sheet dense peak, and the
fraction of the peak `bench peak` measured on this machine, each from the folded throughput. Its section: those
figures per configuration beside where the rest of the step goes (communication, the input, compilation)."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

from bench.metrics import Column, Context, Metric, Part, Ranks, Reads, fmt, present
from bench.metrics.blocks import Block, table_section, text
from bench.metrics.scaling import communication_cell, communication_cost
from bench.results import peak, utilisation
from bench.results.frame import records_of
from bench.spec.peaks import dense_peak, matmul_precision
from bench.spec.rank_record import Result
from bench.status import Status


def _value(figure) -> float | None:
    return float(figure) if present(figure) else None


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


def fold(ranks: Ranks) -> dict:
    """The model's parameters and (rank 0 counts them) FLOPs per training sample."""
    return {"params": ranks.main.params, "flops_per_sample": ranks.main.flops_per_sample}


def derive(folded: pd.DataFrame, context: Context) -> None:
    # The precision the matmuls ran at, which the peaks are read at: the task's, or TF32 where fp32 ran with it on.
    folded["matmul_precision"] = [matmul_precision(r["precision"], r.get("fast_path.tf32") is True)
                                  if isinstance(r.get("precision"), str) else None for r in records_of(folded)]
    records = records_of(folded)
    folded["achieved_tflops"] = [utilisation.tflops(_value(r["flops_per_sample"]), _value(r["throughput"]))
                                 for r in records]
    folded["mfu"] = [utilisation.fraction(_value(r["flops_per_sample"]), r["per_device_throughput"],
                                          dense_peak(_text(r["device_name"]), _text(r["matmul_precision"])))
                     for r in records]
    if context.peaks is not None:
        folded["peak_fraction"] = [peak.fraction_of({k: _value(v) if isinstance(v, float) else v
                                                     for k, v in r.items()}, context.peaks) for r in records]


def entries(part: Part) -> list[dict]:
    """Per measured configuration: how close to the peak, and where the rest goes (communication from
    its no-sync twin; the input's cost three ways: the synthetic-input twin's gap with its 95 % interval,
    the host's wait for batches, the profile's input time; compile time)."""
    records = records_of(part.configs)
    ok = {r["key"]: r for r in records if r["status"] == Status.OK}
    out = []
    for r in records:
        key = r["key"]
        if r["status"] != Status.OK or key.independent or key.input == "synthetic":
            continue  # the twins are read beside the row they explain
        profile = part.profiles.get(key)
        out.append({"row": r, "comm_cost": communication_cost(r, ok.get(key._replace(independent=True))),
                    **_input_cost(r, ok.get(key._replace(input="synthetic", loader_workers=0)), part),
                    "profile_input": profile["parts"]["input"] / profile["step_ms"] if profile else None})
    return out


def _input_cost(r: dict, synthetic: dict | None, part: Part) -> dict:
    """Real over synthetic input: the run's own input phases where it ran them (pairs of windows a window apart),
    else its synthetic-input twin's run (another run, so another moment of the machine)."""
    if present(r.get("input_phases.real_over_resident")):
        return {"real_over_synthetic": r["input_phases.real_over_resident"], "input_from": "phases",
                "real_over_synthetic_ci": (r["input_phases.ci_low"], r["input_phases.ci_high"])}
    between = part.ratio(r["key"], synthetic["key"]) if synthetic else None
    return {"real_over_synthetic": r["throughput"] / synthetic["throughput"] if synthetic else None,
            "input_from": "twin" if synthetic else None,
            "real_over_synthetic_ci": (between.low, between.high) if between else None}


def table(used: list[dict]) -> pd.DataFrame:
    import pandas as pd

    headers = ("variant", "devices", "GFLOP / sample", "TFLOP/s", "MFU", "of measured peak", "matmuls in",
               "communication cost", "real / synthetic input [95% CI]", "input wait (of step)",
               "input in profile (of step)", "compile s")
    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(_giga(e["row"]["flops_per_sample"]), ".4g"),
             fmt(e["row"]["achieved_tflops"], ".3g"), fmt(e["row"]["mfu"], ".1%"), fmt(e["row"]["peak_fraction"], ".1%"),
             e["row"]["matmul_precision"] if present(e["row"]["matmul_precision"]) else "-",
             communication_cell(e["comm_cost"]), _twin_cell(e), fmt(e["row"]["input_wait_fraction"], ".1%"),
             fmt(e["profile_input"], ".1%"), fmt(e["row"]["compile_s"], ".1f")] for e in used]
    return pd.DataFrame(body, columns=list(headers))


def _twin_cell(e: dict) -> str:
    if e["real_over_synthetic"] is None:
        return "-"
    ci = e["real_over_synthetic_ci"]
    phases = " (phases)" if e["input_from"] == "phases" else ""
    return f"{e['real_over_synthetic']:.2f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + phases


def _giga(flops) -> float | None:
    return flops / 1e9 if present(flops) else None


def where_the_rest_goes(used: list[dict]) -> list[str]:
    """One sentence per series, at its largest device count."""
    largest = {}
    for e in used:
        if present(e["row"]["peak_fraction"]):
            largest[e["row"]["series"]] = e  # entries come by ascending device count per series
    sentences = []
    for series, e in largest.items():
        r, parts = e["row"], []
        if e["comm_cost"] is not None:
            parts.append(f"gradient synchronisation costs {e['comm_cost']:.0%} of its throughput (against its no-sync twin)")
        if present(r["input_wait_fraction"]):
            parts.append(f"waiting for input takes {r['input_wait_fraction']:.1%} of its step time")
        if e["real_over_synthetic"] is not None:
            parts.append(f"with the input pipeline left out it runs {1 / e['real_over_synthetic']:.2f}x as fast")
        rest = "; ".join(parts) + "; " if parts else ""
        sentences.append(f"{series} on {r['world_size']} device(s) reaches {r['peak_fraction']:.1%} of the measured "
                         f"{r['matmul_precision']} matmul peak per device: {rest}the rest is the compute itself "
                         "running below the matmul peak (small convolutions, memory-bound layers, framework overhead).")
    return sentences


# The input phases' ratio and interval as the configurations frame holds them (the row's `input_phases`).
PHASE_FIGURES = ("input_phases.real_over_resident", "input_phases.ci_low", "input_phases.ci_high",
                 "input_phases.communication.cost", "input_phases.communication.ci_low",
                 "input_phases.communication.ci_high")

INPUT_COST_NOTE = (
    "The input's cost is measured three ways. Read the synthetic twin's: the same run with one batch made on the "
    "device, so 1 - real / synthetic is everything the input pipeline costs the step (reading and collating the "
    "batch, copying and normalising it, the memory a fresh batch touches), with its interval from the runs. "
    "The input wait (PyTorch only: TensorFlow fetches inside its compiled step) times just the loop blocking on "
    "the next batch, and the profile's input just the input work that nothing else runs beside; both leave out "
    "what a fresh batch costs the step's own operators, so they can sit below the twin's gap.")


PHASES_NOTE = ("Marked (phases), the run measured the input's cost itself: each timed window followed by one on the "
               "same batches made resident on the device beforehand, the input pipeline idle; the ratio and its "
               "interval are over those pairs, a window apart (docs/methodology.md#the-inputs-cost-in-the-run).")


def input_disagreements(used: list[dict]) -> list[str]:
    """Rows whose input wait falls outside what their synthetic twin says the input costs, with the reason."""
    out = []
    for e in used:
        wait, ci = e["row"]["input_wait_fraction"], e["real_over_synthetic_ci"]
        if not present(wait) or ci is None:
            continue
        low, high = 1 - ci[1], 1 - ci[0]  # the cost's interval from the ratio's
        if low <= wait <= high:
            continue
        phases = e["input_from"] == "phases"
        why = ("the wait leaves out what a fresh batch costs the step itself (its copy, normalisation and memory); "
               + ("read the phases' gap" if phases else "read the twin's gap") if wait < low else
               "the wait counts what the resident windows leave out too (a batch's wait the step hid)" if phases else
               "the twin's runs drifted from this configuration's; repeat both")
        out.append(f"{e['row']['series']} on {e['row']['world_size']} device(s): "
                   f"{'its input phases put' if phases else 'its synthetic twin puts'} the input's cost at "
                   f"{1 - e['real_over_synthetic']:.0%} [{low:.0%}, {high:.0%}], its input wait at {wait:.1%}: {why}")
    return out


def section(part: Part) -> list[Block]:
    used = entries(part)
    if not any(present(e["row"]["flops_per_sample"]) for e in used):
        return []
    blocks = table_section("How close to the hardware", 3, (
        "FLOPs counted per training sample (forward + backward, multiply-add = 2; torch's "
        "FlopCounterMode, Keras layers counted alike); MFU against the device's data-sheet dense peak "
        "(known GPUs only); of measured peak against `python -m bench peak` on this machine, per device "
        "and at the precision the matmuls ran in."), table(used))
    rest = where_the_rest_goes(used)
    if rest:
        blocks.append(text(*rest))
    if any(e["real_over_synthetic"] is not None for e in used):
        phases = [PHASES_NOTE] if any(e["input_from"] == "phases" for e in used) else []
        blocks.append(text(INPUT_COST_NOTE, *phases, *[f"- {line}" for line in input_disagreements(used)]))
    return blocks


METRIC = Metric("utilisation", fold=fold, reads=(Reads(Result, ("params", "flops_per_sample")),),
                row_fields=("params", "flops_per_sample"),
                figures=("params", "flops_per_sample", "matmul_precision", "achieved_tflops", "mfu", "peak_fraction",
                         *PHASE_FIGURES),
                derived=("achieved_tflops", "mfu", "peak_fraction"), columns=(
    Column("TFLOP/s", "achieved_tflops", ".3g", True),
    Column("MFU", "mfu", ".1%", True),
    Column("of meas. peak", "peak_fraction", ".1%", True),
), derive=derive, section=section)
