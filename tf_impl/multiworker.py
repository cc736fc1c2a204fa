"""tf-multiworker: MultiWorkerMirroredStrategy, one process per worker configured by TF_CONFIG.

The harness gives each worker its TF_CONFIG (a loopback cluster, its task
index). Per device slot (the default) every worker drives one device; per node
one worker mirrors over its node's GPUs. Collectives: NCCL on GPUs, ring on CPU.
"""
from tf_impl import rank

if __name__ == "__main__":
    rank.main("multiworker")
