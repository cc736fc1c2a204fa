"""The framework family an approach belongs to: whose models it trains, whose kernels it runs and which interpreter
starts it. Named once, on the variant (bench.spec.variants.Variant.family). Standard library only: it lives apart
from the variants table because a rank reads it too (bench.spec.models, through the task)."""
from __future__ import annotations

from enum import StrEnum


class Family(StrEnum):
    TORCH = "torch"             # PyTorch, and the approaches that wrap it (DeepSpeed, Lightning, Accelerate)
    TENSORFLOW = "tensorflow"
