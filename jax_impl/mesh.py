"""jax-mesh: the JAX loop (jax_impl/train.py) with the batch sharded over a Mesh of the node's devices, one process."""
from jax_impl import rank

if __name__ == "__main__":
    rank.main("mesh")
