"""The knobs of TensorFlow's strategies: MultiWorkerMirroredStrategy's collectives (CommunicationOptions) and
MirroredStrategy's cross-device ops, declared for tuning (bench.spec.knobs) and handed to the strategy by
tf_impl/strategies.py. No TensorFlow import: the harness lists them."""
from bench.spec.knobs import Knob, choice

IMPLEMENTATION = Knob(
    "implementation", "CommunicationOptions(implementation=): the collectives' implementation (dtbench's RING on a "
    "CPU, NCCL on GPUs; AUTO: TensorFlow's choice)", choice("auto", "ring", "nccl"), None, ("auto", "ring"))
BYTES_PER_PACK = Knob(
    "bytes_per_pack", "CommunicationOptions(bytes_per_pack=): the gradients packed into all-reduces of about this "
    "many bytes (0: TensorFlow's, one pack)", int, 0, (1 * 2**20, 4 * 2**20, 32 * 2**20))

MULTIWORKER = (IMPLEMENTATION, BYTES_PER_PACK)

CROSS_DEVICE_OPS = Knob(
    "cross_device_ops", "MirroredStrategy(cross_device_ops=): how the replicas' gradients are summed: TensorFlow's "
    "choice (its collective all-reduce on CPUs), ReductionToOneDevice (summed on one device, copied back), "
    "HierarchicalCopyAllReduce (the tree of copies made for 8-GPU boxes) or NcclAllReduce",
    choice("reduction_to_one_device", "hierarchical_copy", "nccl"), None,
    ("reduction_to_one_device", "hierarchical_copy"))

MIRRORED = (CROSS_DEVICE_OPS,)
