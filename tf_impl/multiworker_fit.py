"""tf-multiworker-fit: tf-multiworker's MultiWorkerMirroredStrategy (one process per worker, its TF_CONFIG),
trained with `model.compile` and `model.fit` under the strategy (tf_impl/fit.py), as TensorFlow's multi-worker
Keras guide shows. Keras 2 (tf-keras): the variant's launch sets TF_USE_LEGACY_KERAS=1, because Keras 3's `fit`
fails under this strategy (keras-team/keras#20585); tf_impl/keras_flavour.py picks it up."""
from tf_impl import rank

if __name__ == "__main__":
    rank.main("multiworker", fit=True)
