"""Accuracy: exact test accuracy and loss over the whole test set (each sample evaluated once across ranks), and
the training time to the task's target accuracy."""
from __future__ import annotations

from bench.metrics import Column, Metric, Ranks, Reads
from bench.spec.rank_record import Result


def fold(ranks: Ranks) -> dict:
    """Rank 0's last evaluation (summed over every rank's share of the test set) and the epochs it closed."""
    main = ranks.main
    return {"epochs": main.epochs, "test_accuracy": main.test_accuracy, "test_loss": main.test_loss,
            "eval_samples": main.eval_samples, "time_to_accuracy_s": main.time_to_accuracy_s}


ROW_FIELDS = ("epochs", "test_accuracy", "test_loss", "eval_samples", "time_to_accuracy_s")  # as the result names them
METRIC = Metric("accuracy", fold=fold, reads=(Reads(Result, ROW_FIELDS),), row_fields=ROW_FIELDS,
                figures=("test_accuracy", "test_loss", "eval_samples", "time_to_accuracy_s", "target_accuracy"),
                columns=(
    Column("test acc.", "test_accuracy", ".4f", True),
    Column("eval n", "eval_samples", ".0f"),
    Column("time to acc. s", "time_to_accuracy_s", ".1f", False),
), repeats=tuple((c, "median") for c in ("test_accuracy", "test_loss", "time_to_accuracy_s")))
