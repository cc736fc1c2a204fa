"""jax-single: the JAX loop (jax_impl/train.py) on one device: the baseline."""
from jax_impl import rank

if __name__ == "__main__":
    rank.main("single")
