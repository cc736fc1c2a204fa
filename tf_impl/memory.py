"""Memory of a TensorFlow rank: the model state it holds, and its peak (the GPU allocator's, else the RSS)."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from bench.worker import peak_rss_mb


def model_state_bytes(model, optimizer) -> dict:
    """Bytes of one replica's model state: the variables (every replica holds a mirrored copy) and the
    optimizer's slots; TensorFlow's gradients live only inside the step (None: not resident)."""
    def size(variables) -> int:
        return int(sum(np.prod(v.shape) * tf.as_dtype(v.dtype).size for v in variables if len(v.shape)))

    inner = getattr(optimizer, "inner_optimizer", optimizer)  # under a LossScaleOptimizer
    return {"parameters": size(model.variables), "gradients": None, "optimizer": size(inner.variables)}


def peak_memory_mb() -> float:
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return max(tf.config.experimental.get_memory_info(g.name)["peak"] for g in gpus) / 2**20
    return peak_rss_mb()
