"""tf-mirrored-fit: tf-mirrored's MirroredStrategy, trained as most TensorFlow users train: `model.compile` and
`model.fit` under the strategy (tf_impl/fit.py), beside the custom loop it is compared with."""
from tf_impl import rank

if __name__ == "__main__":
    rank.main("mirrored", fit=True)
