"""JAX as dtbench's harness knows it (bench.spec.frameworks), and its variants: standard library only, so that the
harness and every rank can read it without importing JAX.

Data parallelism in JAX is one program: `jax.jit` over a device `Mesh` with the batch sharded along its "data" axis
(`NamedSharding`), XLA inserting the gradients' all-reduce. jax-single runs it on one device, jax-mesh over the
node's devices in one process (on a CPU, N host devices made by XLA_FLAGS), jax-distributed over one process per
device joined by `jax.distributed` (gloo collectives on CPU, NCCL on GPUs)."""
from __future__ import annotations

from bench.spec.frameworks import Framework
from bench.spec.variants import Variant

FRAMEWORK = Framework(
    name="jax", title="JAX", package="jax", extra="jax", model_check="jax_impl.model", panels=("JAX",),
    built_in_models=("small-cnn",),  # jax_impl.model.BUILT_IN: the refusal comes before anything starts
    not_offered=("Keras 3 compile + fit on the JAX backend (keras.distribution.DataParallel): not built yet",),
    distributions=("jax", "jaxlib", "optax"), python_env="DTBENCH_JAX_PYTHON",
    plain_loop=("jax-single", "probes.plain_jax_loop"),
    input_phases=True,  # every JAX variant trains through jax_impl/train.py's loop
)

# What none of them wires yet, and says so up front. Not in the default sweep until its time there is measured
# against the 20 % budget (jax-distributed's gloo step was 3.5x torch-ddp's on the quick task here).
_UNWIRED = dict(in_default_sweep=False, checkpoints=False, checkpoint_hint="JAX's state is not checkpointed by dtbench yet",
                compiles=False,  # every JAX step is compiled by XLA already: --compile has nothing to switch
                reads_files=False, profiles=False)

VARIANTS = (
    Variant("jax-single", "jax", "jax", "bench.run.launch:PYTHON", "jax_impl.single", single_process=True,
            spans_nodes=False, max_devices=1, summary="JAX, the jax.jit loop on one device", **_UNWIRED),
    Variant("jax-mesh", "jax", "jax", "bench.run.launch:PYTHON", "jax_impl.mesh", single_process=True,
            spans_nodes=False, baseline="jax-single",
            summary="JAX jax.jit with the batch sharded over a Mesh of the node's devices, one process "
                    "(CPU: XLA host devices)", **_UNWIRED),
    Variant("jax-distributed", "jax", "jax", "jax_impl.launch:JAX_DISTRIBUTED", "jax_impl.distributed",
            single_process=False, spans_nodes=True, baseline="jax-single",
            summary="JAX jax.jit over every process's devices, one process per device slot joined by "
                    "jax.distributed (gloo on CPU, NCCL on GPUs)", **_UNWIRED),
)
