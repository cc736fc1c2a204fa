"""One model name, two frameworks' builds: whether PyTorch's and TensorFlow's runs of a model named for both (a
built-in one, or one both libraries have: bench.spec.models.PAIRED) trained the same model, measured from their
rows (parameters, counted FLOPs per sample) rather than assumed from the name. The verdict ranks the two against
each other only when they agree within PAIR_TOLERANCE; the report shows both side by side."""
from __future__ import annotations

import pandas as pd

from bench.metrics import fmt, present
from bench.metrics.blocks import Block, heading, text
from bench.results.frame import records_of
from bench.spec import frameworks
from bench.spec.models import PAIR_TOLERANCE, framework_name, parse
from bench.spec.variants import VARIANTS


def family(variant: str) -> str:
    """A row's variant's family; a variant no longer in the table counts as the first framework's, as family_of
    counts a framework no variant records."""
    return VARIANTS[variant].family if variant in VARIANTS else frameworks.names()[0]


def _sizes(lines: pd.DataFrame | list[dict]) -> dict[str, tuple[float | None, float | None]]:
    """family -> (parameters, FLOPs per sample) as its ok runs recorded them (the first that has each), in the
    frameworks' order."""
    found: dict[str, list] = {}
    for r in (records_of(lines) if isinstance(lines, pd.DataFrame) else lines):
        sizes = found.setdefault(family(r["variant"]), [None, None])
        for i, column in enumerate(("params", "flops_per_sample")):
            value = r.get(column)
            if sizes[i] is None and present(value) and value > 0:
                sizes[i] = float(value)
    return {f: tuple(found[f]) for f in frameworks.names() if f in found}


def differences(lines) -> list[str]:
    """How the frameworks' builds differ beyond PAIR_TOLERANCE ("FLOPs per sample 12 % apart", the widest pair);
    empty when they agree, when one framework ran alone, or when a side recorded no figure to compare."""
    sizes = list(_sizes(lines).values())
    out = []
    for i, what in enumerate(("parameters", "FLOPs per sample")):
        figures = [s[i] for s in sizes if s[i]]
        if len(figures) > 1 and (apart := (max(figures) - min(figures)) / max(figures)) > PAIR_TOLERANCE:
            out.append(f"{what} {apart:.0%} apart")
    return out


def both_frameworks(model: str) -> bool:
    """A name each framework builds its own way (not a library's name of one framework, nor a user's module)."""
    try:
        return parse(model).framework is None and parse(model).source != "module"
    except ValueError:
        return False


def table(configs: pd.DataFrame) -> pd.DataFrame | None:
    """Per model named for both that the frameworks ran: each one's parameters and FLOPs, and whether they agree."""
    if configs.empty or "model" not in configs:
        return None
    out = []
    for model, lines in configs.groupby("model", sort=False):
        sizes = _sizes(lines)
        if not both_frameworks(model) or len(sizes) < 2:
            continue
        apart = differences(lines)
        out.append({"model": model,
                    **{f"{framework_name(f)} params": fmt(p, ",.0f") for f, (p, _) in sizes.items()},
                    **{f"{framework_name(f)} MFLOPs/sample": fmt(flops and flops / 1e6, ",.1f")
                       for f, (_, flops) in sizes.items()},
                    "ranked together": "no: not the same model (" + ", ".join(apart) + ")" if apart else "yes"})
    return pd.DataFrame(out) if out else None


def section(configs: pd.DataFrame) -> list[Block]:
    found = table(configs)
    if found is None:
        return []
    builds = ", ".join(f"{f.title}: {f.builds_from}" for f in frameworks.registry().values() if f.builds_from)
    return [heading("Models both frameworks built", 2),
            text(f"One name, each framework's own build ({builds}). The verdict ranks one "
                 f"framework's runs against the other's only where parameters and counted FLOPs per sample agree "
                 f"within {PAIR_TOLERANCE:.0%}; otherwise each framework is ranked on its own."),
            Block("table", found)]
