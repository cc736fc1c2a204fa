"""The knobs of Accelerate's DDP (`DistributedDataParallelKwargs`, the kwargs handler it hands to DDP in `prepare`),
declared for tuning (bench.spec.knobs) with Accelerate's own defaults, and handed to it by accelerate_impl/train.py.
Its FSDP and DeepSpeed plugins take none of them. No accelerate import: the harness lists them."""
from torch_impl.knobs import CHANNELS_LAST
from bench.spec.knobs import Knob, boolean, choice

DDP = (
    Knob("bucket_cap_mb", "DistributedDataParallelKwargs(bucket_cap_mb=): the gradients are all-reduced in buckets "
         "of this many MiB (Accelerate's default 25)", int, 25, (1, 5, 100)),
    Knob("gradient_as_bucket_view", "DistributedDataParallelKwargs(gradient_as_bucket_view=): the gradients are "
         "views into the buckets, with no copy in and out each step (Accelerate's default false)", boolean, False,
         (True,)),
    Knob("static_graph", "DistributedDataParallelKwargs(static_graph=): the buckets fixed to the gradients' ready "
         "order after the first step (Accelerate's default false)", boolean, False, (True,)),
    Knob("comm_hook", "DistributedDataParallelKwargs(comm_hook=): the gradients all-reduced in bf16 or fp16 (half "
         "the bytes), or not (no: Accelerate's default)", choice("no", "bf16", "fp16"), "no", ("bf16",),
         changes_arithmetic=True),
    CHANNELS_LAST,
)
