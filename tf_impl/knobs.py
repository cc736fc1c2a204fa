"""The knobs of TensorFlow's strategies: MultiWorkerMirroredStrategy's collectives (CommunicationOptions) and
MirroredStrategy's cross-device ops, declared for tuning (bench.spec.knobs) and handed to the strategy by
tf_impl/strategies.py; and Keras fit's steps_per_execution (tf_impl/fit.py). No TensorFlow import: the harness
lists them."""
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


def _divides_the_timing(value: int, task) -> str | None:
    """Keras calls back once an execution: the clock's boundaries must fall on one's end (a kept loss is its
    execution's mean, wherever it falls)."""
    timing = task.timing
    steps = {"--warmup-steps": timing.warmup_steps, "--window-steps": timing.window_steps,
             "--steps-per-epoch": task.recipe.steps_per_epoch}
    uneven = [f"{flag} {n}" for flag, n in steps.items() if n and n % value]
    return f"it must divide {', '.join(uneven)}" if uneven else None


STEPS_PER_EXECUTION = Knob(
    "steps_per_execution", "model.compile(steps_per_execution=): the training steps one call of fit's compiled "
    "function runs (Keras calls back once a call)", int, 1, (2, 4), fits=_divides_the_timing)

# Keras 2's fit only (tf-multiworker-fit): Keras 3.15's multi-step loop under MirroredStrategy fails on TensorFlow
# 2.21 ("You must feed a value for placeholder tensor 'while/cond/Placeholder'"), so tf-mirrored-fit has none.
MULTIWORKER_FIT = MULTIWORKER + (STEPS_PER_EXECUTION,)
