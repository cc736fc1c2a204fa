"""jax-distributed: the JAX loop (jax_impl/train.py) over one process per device slot, joined by jax.distributed."""
from jax_impl import rank

if __name__ == "__main__":
    rank.main("distributed")
