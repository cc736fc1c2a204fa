"""tf-single: the TensorFlow loop under TensorFlow's default (no-op) strategy on one device: the baseline."""
from tf_impl import rank

if __name__ == "__main__":
    rank.main("default")
