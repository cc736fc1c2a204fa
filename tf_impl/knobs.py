"""The knobs of TensorFlow's MultiWorkerMirroredStrategy: its collectives' CommunicationOptions, declared for tuning
(bench.spec.knobs) and handed to the strategy by tf_impl/strategies.py. No TensorFlow import: the harness lists them."""
from bench.spec.knobs import Knob, choice

IMPLEMENTATION = Knob(
    "implementation", "CommunicationOptions(implementation=): the collectives' implementation (dtbench's RING on a "
    "CPU, NCCL on GPUs; AUTO: TensorFlow's choice)", choice("auto", "ring", "nccl"), None, ("auto", "ring"))
BYTES_PER_PACK = Knob(
    "bytes_per_pack", "CommunicationOptions(bytes_per_pack=): the gradients packed into all-reduces of about this "
    "many bytes (0: TensorFlow's, one pack)", int, 0, (1 * 2**20, 4 * 2**20, 32 * 2**20))

MULTIWORKER = (IMPLEMENTATION, BYTES_PER_PACK)
