"""Which Keras this process trains with: Keras 3 (`keras`), or Keras 2 (`tf_keras`, what `tf.keras` is under
TF_USE_LEGACY_KERAS=1) where the variant's launch environment sets it. tf-multiworker-fit does: Keras 3's `fit`
fails under MultiWorkerMirroredStrategy (keras-team/keras#20585); every other variant keeps Keras 3.

The model, recipe and fit modules import `keras` from here; so does the row's `keras` field. Import it only once
`configure()` (tf_impl/configure.py) has pinned the process (it imports Keras).
"""
from __future__ import annotations

import os

# TensorFlow's own test of the variable (tensorflow/python/util/lazy_loader.py).
LEGACY = os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")

if LEGACY:
    import tensorflow as tf
    import tf_keras as keras

    ops = tf  # the few `keras.ops` the recipe uses (cast, add, multiply) are TensorFlow's own
else:
    import keras
    from keras import ops

FLAVOUR = f"tf-keras {keras.__version__}" if LEGACY else f"keras {keras.__version__}"

__all__ = ["LEGACY", "FLAVOUR", "keras", "ops"]
