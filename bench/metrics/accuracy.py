"""Accuracy: exact test accuracy and loss over the whole test set (each sample evaluated once across ranks), and
the training time to the task's target accuracy."""
from __future__ import annotations

from bench.metrics import Column, Metric, Ranks


def fold(ranks: Ranks) -> dict:
    """Rank 0's last evaluation (summed over every rank's share of the test set) and the epochs it closed."""
    main = ranks.main
    return {name: main.get(name) for name in ("epochs", "test_accuracy", "test_loss", "eval_samples",
                                              "time_to_accuracy_s")}


METRIC = Metric("accuracy", fold=fold, figures=("test_accuracy", "test_loss", "eval_samples", "time_to_accuracy_s",
                                                "target_accuracy"), columns=(
    Column("test acc.", "test_accuracy", ".4f", True),
    Column("eval n", "eval_samples", ".0f"),
    Column("time to acc. s", "time_to_accuracy_s", ".1f", False),
), repeats=tuple((c, "median") for c in ("test_accuracy", "test_loss", "time_to_accuracy_s")))
