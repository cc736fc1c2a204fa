"""The knobs of DeepSpeed's ZeRO (its config file's zero_optimization section), declared for tuning
(bench.spec.knobs) and written into the run's config by deepspeed_impl/launch.py. A knob left at its default is
not written: the config stays as DeepSpeed (and dtbench, for the reduction bucket) sets it. No DeepSpeed import."""
from bench.spec.knobs import Knob, boolean

# ZeRO's gradient-reduction bucket, in elements: DDP's (torch's default bucket_cap_mb, 25 MiB) of fp32 gradients.
# DeepSpeed's default (5e8 elements, 2 GB in fp32) is allocated whole whatever the model (stages 1 and 2: at every
# step, twice under overlap_comm; stage 3: once): on a small model it, not ZeRO, set the largest batch that fits.
ZERO_REDUCE_BUCKET = 25 * 2**20 // 4


def elements(text: str) -> int:
    """A bucket size in elements, as DeepSpeed's config takes it (5e8 and 500000000 alike)."""
    value = float(text)
    if value < 1 or value != int(value):
        raise ValueError(f"{text!r} is not a count of elements")
    return int(value)


REDUCE_BUCKET_SIZE = Knob(
    "reduce_bucket_size", "zero_optimization.reduce_bucket_size: elements reduced at once (dtbench's 6,553,600: "
    "DDP's 25 MiB of fp32; DeepSpeed's own 5e8)", elements, ZERO_REDUCE_BUCKET, (500_000, 50_000_000))
ALLGATHER_BUCKET_SIZE = Knob(
    "allgather_bucket_size", "zero_optimization.allgather_bucket_size: elements all-gathered at once after the "
    "optimizer step (stages 1 and 2; DeepSpeed's default 5e8)", elements, 500_000_000, (5_000_000, 50_000_000))
OVERLAP_COMM = Knob(
    "overlap_comm", "zero_optimization.overlap_comm: reduce the gradients while the backward pass runs (DeepSpeed's "
    "default: true at stage 3, else false)", boolean, None, (True, False))
CONTIGUOUS_GRADIENTS = Knob(
    "contiguous_gradients", "zero_optimization.contiguous_gradients: copy the gradients into one buffer as they are "
    "produced (DeepSpeed's default true)", boolean, True, (False,))
PREFETCH_BUCKET_SIZE = Knob(
    "stage3_prefetch_bucket_size", "zero_optimization.stage3_prefetch_bucket_size: parameters fetched ahead of use "
    "(stage 3; DeepSpeed's default 5e7 elements)", elements, 50_000_000, (500_000, 5_000_000))
PERSISTENCE_THRESHOLD = Knob(
    "stage3_param_persistence_threshold", "zero_optimization.stage3_param_persistence_threshold: parameters smaller "
    "than this stay whole on every rank (stage 3; dtbench's 0 shards every one, ZeRO-3 as such; DeepSpeed's 1e5)",
    lambda text: int(float(text)), 0, (100_000, 1_000_000))

ZERO = (REDUCE_BUCKET_SIZE, ALLGATHER_BUCKET_SIZE, OVERLAP_COMM, CONTIGUOUS_GRADIENTS, PREFETCH_BUCKET_SIZE,
        PERSISTENCE_THRESHOLD)  # no channels_last: ZeRO flattens the parameters into one buffer
