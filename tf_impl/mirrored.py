"""tf-mirrored: MirroredStrategy, one process over its node's devices.

On GPUs it mirrors over every visible GPU; on a CPU-only machine over N logical
CPU devices, so that it really runs N replicas (and the row checks it does).
"""
from tf_impl import rank

if __name__ == "__main__":
    rank.main("mirrored")
