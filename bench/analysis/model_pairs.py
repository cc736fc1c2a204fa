"""One model name, two frameworks' builds: whether PyTorch's and TensorFlow's runs of a model named for both (a
built-in one, or one both libraries have: bench.spec.models.PAIRED) trained the same model, measured from their
rows (parameters, counted FLOPs per sample) rather than assumed from the name. The verdict ranks the two against
each other only when they agree within PAIR_TOLERANCE; the report shows both side by side."""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt, present
from bench.metrics.blocks import Block, heading, text
from bench.results.frame import records_of
from bench.spec.family import Family
from bench.spec.models import PAIR_TOLERANCE, framework_name, parse
from bench.spec.variants import VARIANTS


def family(variant: str) -> Family:
    return VARIANTS[variant].family if variant in VARIANTS else Family.TORCH


def _sizes(lines: pd.DataFrame | list[dict]) -> dict[Family, tuple[float | None, float | None]]:
    """family -> (parameters, FLOPs per sample) as its ok runs recorded them (the first that has each)."""
    found: dict[Family, list] = {}
    for r in (records_of(lines) if isinstance(lines, pd.DataFrame) else lines):
        sizes = found.setdefault(family(r["variant"]), [None, None])
        for i, column in enumerate(("params", "flops_per_sample")):
            value = r.get(column)
            if sizes[i] is None and present(value) and value > 0:
                sizes[i] = float(value)
    return {f: (p, flops) for f, (p, flops) in found.items()}


def differences(lines) -> list[str]:
    """How the two frameworks' builds differ beyond PAIR_TOLERANCE ("FLOPs per sample 12 % apart"); empty when they
    agree, when one framework ran alone, or when a side recorded no figure to compare."""
    sizes = _sizes(lines)
    if len(sizes) < 2:
        return []
    (torch_params, torch_flops), (tf_params, tf_flops) = (sizes.get(Family.TORCH, (None, None)),
                                                          sizes.get(Family.TENSORFLOW, (None, None)))
    out = []
    for what, a, b in (("parameters", torch_params, tf_params), ("FLOPs per sample", torch_flops, tf_flops)):
        if a and b and abs(a - b) / max(a, b) > PAIR_TOLERANCE:
            out.append(f"{what} {abs(a - b) / max(a, b):.0%} apart")
    return out


def both_frameworks(model: str) -> bool:
    """A name each framework builds its own way (not a library's name of one framework, nor a user's module)."""
    try:
        return parse(model).framework is None and parse(model).source != "module"
    except ValueError:
        return False


def table(configs: pd.DataFrame) -> pd.DataFrame | None:
    """Per model named for both that both frameworks ran: each one's parameters and FLOPs, and whether they agree."""
    if configs.empty or "model" not in configs:
        return None
    out = []
    for model, lines in configs.groupby("model", sort=False):
        sizes = _sizes(lines)
        if not both_frameworks(model) or len(sizes) < 2:
            continue
        apart = differences(lines)
        (tp, tf), (kp, kf) = sizes[Family.TORCH], sizes[Family.TENSORFLOW]
        out.append({"model": model, "PyTorch params": fmt(tp, ",.0f"), "TensorFlow params": fmt(kp, ",.0f"),
                    "PyTorch MFLOPs/sample": fmt(tf and tf / 1e6, ",.1f"),
                    "TensorFlow MFLOPs/sample": fmt(kf and kf / 1e6, ",.1f"),
                    "ranked together": "no: not the same model (" + ", ".join(apart) + ")" if apart else "yes"})
    return pd.DataFrame(out) if out else None


def section(configs: pd.DataFrame) -> list[Block]:
    found = table(configs)
    if found is None:
        return []
    return [heading("Models both frameworks built", 2),
            text(f"One name, each framework's own build ({framework_name(Family.TORCH)}: timm's or dtbench's, "
                 f"{framework_name(Family.TENSORFLOW)}: keras.applications' or dtbench's). The verdict ranks one "
                 f"framework's runs against the other's only where parameters and counted FLOPs per sample agree "
                 f"within {PAIR_TOLERANCE:.0%}; otherwise each framework is ranked on its own."),
            Block("table", found)]
