"""The knobs of PyTorch's DistributedDataParallel (torch-ddp; torch-ddp-static, whose graph is static already) and
of FSDP2 (torch-fsdp), declared for tuning (bench.spec.knobs) and handed to DDP by torch_impl/ddp.py and to
`fully_shard` by torch_impl/fsdp.py. No torch import: the harness lists them."""
from bench.spec.knobs import Knob, boolean, choice

BUCKET_CAP_MB = Knob(
    "bucket_cap_mb", "DDP(bucket_cap_mb=): the gradients are all-reduced in buckets of this many MiB, each as soon as "
    "the backward pass has filled it (PyTorch's default 25)", float, 25.0, (1.0, 5.0, 100.0))
GRADIENT_AS_BUCKET_VIEW = Knob(
    "gradient_as_bucket_view", "DDP(gradient_as_bucket_view=): the gradients are views into the buckets, with no "
    "copy in and out each step (PyTorch's default false; dtbench's true)", boolean, True, (False,))
STATIC_GRAPH = Knob(
    "static_graph", "DDP(static_graph=): the buckets are fixed to the gradients' ready order after the first step "
    "(torch-ddp-static)", boolean, False, (True,))
COMM_HOOK = Knob(
    "comm_hook", "a DDP communication hook: none, or the gradients all-reduced in bf16 or fp16 (half the bytes; "
    "torch.distributed.algorithms.ddp_comm_hooks.default_hooks)", choice("none", "bf16_compress", "fp16_compress"),
    "none", ("bf16_compress",), changes_arithmetic=True)

# The PyTorch approaches' whose parameters may be channels_last (not FSDP2's or ZeRO's, which need them
# contiguous); the harness sets the fast-path audit's variable for the ranks (bench.run.launch).
CHANNELS_LAST = Knob(
    "channels_last", "the model and its input in NHWC memory (torch.channels_last): PyTorch's fast path for "
    "convolutions on CUDA, dtbench's there; on a CPU its gain comes and goes with the CPU (the fast-path audit), "
    "dtbench's default off", boolean, False, (True,))

DDP = (BUCKET_CAP_MB, GRADIENT_AS_BUCKET_VIEW, STATIC_GRAPH, COMM_HOOK, CHANNELS_LAST)
DDP_STATIC = (BUCKET_CAP_MB, GRADIENT_AS_BUCKET_VIEW, COMM_HOOK, CHANNELS_LAST)

RESHARD_AFTER_FORWARD = Knob(
    "reshard_after_forward", "fully_shard(reshard_after_forward=) on each block: free its gathered parameters after "
    "its forward and all-gather them again for its backward (FSDP2's default true); false keeps them until the "
    "backward: one all-gather fewer a step, ZeRO-2's memory", boolean, True, (False,))
SHARD_UNIT = Knob(
    "shard_unit", "what is gathered at once: each block on its own, then the root (dtbench's default, as torchtitan "
    "wraps a transformer's blocks), or the whole model as one unit (fewer, larger collectives; every parameter "
    "gathered at once)", choice("block", "model"), "block", ("model",))

FSDP = (RESHARD_AFTER_FORWARD, SHARD_UNIT)  # no channels_last: FSDP2 refuses channels_last parameters
