"""The knobs of Lightning Fabric's DDP strategy (`DDPStrategy(**kwargs)`, which hands them to DDP), declared for
tuning (bench.spec.knobs) at DDP's own defaults, as Fabric keeps them, and handed to it by lightning_impl/train.py.
Fabric's strategy takes no communication hook. No Lightning import: the harness lists them."""
from torch_impl.knobs import CHANNELS_LAST
from bench.spec.knobs import Knob, boolean

# What DDPStrategy(**kwargs) takes; channels_last reaches the rank through the harness (bench.run.launch).
STRATEGY = (
    Knob("bucket_cap_mb", "DDPStrategy(bucket_cap_mb=): the gradients are all-reduced in buckets of this many MiB "
         "(DDP's default 25)", float, 25.0, (1.0, 5.0, 100.0)),
    Knob("gradient_as_bucket_view", "DDPStrategy(gradient_as_bucket_view=): the gradients are views into the buckets, "
         "with no copy in and out each step (DDP's default false)", boolean, False, (True,)),
    Knob("static_graph", "DDPStrategy(static_graph=): the buckets fixed to the gradients' ready order after the first "
         "step (DDP's default false)", boolean, False, (True,)),
)
DDP = STRATEGY + (CHANNELS_LAST,)
