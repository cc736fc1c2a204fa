"""TensorFlow as dtbench's harness knows it (bench.spec.frameworks): standard library only, so that the harness and
every rank can read it without importing TensorFlow.

On a GPU box TensorFlow's GPU build lives in a venv of its own (`.venv-tf`, made by `make setup` when nvidia-smi
lists a GPU): `tensorflow[and-cuda]` resolves beside torch 2.14.1, but its CUDA-12 cuDNN and NCCL wheels write the
same files (`nvidia/nccl/lib/libnccl.so.2`, `nvidia/cudnn/lib/libcudnn*.so.9`) as torch's CUDA-13 ones, so one venv
would leave torch on TensorFlow's libraries. The two frameworks never share a process anyway: the harness starts each
variant with its framework's interpreter."""
from __future__ import annotations

import json
import os
import subprocess

from bench.spec.frameworks import Framework
from bench.worker.gpus import TF_PYTHON_ENV, gpus_not_seen

PROBE = ("import json, tensorflow as tf; b = tf.sysconfig.get_build_info(); print(json.dumps({"
         "'gpus': len(tf.config.list_physical_devices('GPU')), 'version': tf.__version__, "
         "'cuda': b.get('cuda_version') if b.get('is_cuda_build') else None}))")


def gpus_seen(cuda_visible: str, timeout_s: float = 180) -> dict:
    """What TensorFlow's interpreter sees given these GPUs: {gpus, version, cuda (None: a CPU-only build)}."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": cuda_visible, "TF_CPP_MIN_LOG_LEVEL": "3"}
    python = FRAMEWORK.python()
    try:
        out = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"gpus": 0, "version": None, "cuda": None, "python": python, "problem": str(exc)}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"gpus": 0, "version": None, "cuda": None, "python": python, "problem": last}
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "python": python}


def gpu_problem(variant: str, cuda_visible: list[str]) -> str | None:
    """`bench run` of a TensorFlow variant on CUDA, before anything starts: why not, where TensorFlow's interpreter
    sees fewer GPUs than the run gives it (a sweep records the worker's own refusal instead)."""
    seen = gpus_seen(",".join(cuda_visible))
    if seen["gpus"] >= len(cuda_visible):
        return None
    tensorflow = f"TensorFlow {seen['version']}" if seen["version"] else f"no TensorFlow ({seen.get('problem')})"
    return gpus_not_seen(variant, cuda_visible, seen["gpus"], tensorflow, seen["cuda"], seen["python"])


def kernel_summary(kernels: dict, switches: dict) -> list[str]:
    """The report header's line of TensorFlow's kernels (recorded by tf_impl.kernels in every rank)."""
    who = " unset" if kernels["onednn_switch"] == "unset" else f"={kernels['onednn_switch']}"
    default = "on" if kernels.get("onednn_default") else "off"
    parts = [f"oneDNN {'on' if kernels['onednn'] else 'off (Eigen kernels)'} "
             f"(TF_ENABLE_ONEDNN_OPTS{who}; TensorFlow's default on this CPU: {default})",
             f"XLA {'on' if switches.get('compile') else 'off'}"]
    if kernels.get("cudnn"):
        parts.append(f"CUDA {kernels.get('cuda')}, cuDNN {kernels['cudnn']}, "
                     f"TF32 {'on' if kernels.get('tf32') else 'off'}")
    return parts


FRAMEWORK = Framework(
    name="tensorflow", title="TensorFlow", package="tensorflow", extra="tf", model_check="tf_impl.model",
    panels=("TensorFlow",),
    model_libraries=("keras",), paired_library="keras", builds_from="keras.applications' or dtbench's",
    model_types=("keras", "tf_keras"), distributions=("tensorflow", "tensorflow-cpu", "keras", "tf-keras"),
    plain_loop=("tf-single", "probes.plain_tf_loop"),
    fast_path_environment="tf_impl.fast_path:environment",
    input_phases=True,  # the custom loop (tf_impl/train.py) and fit (tf_impl/fit.py); tf-ps's variant says otherwise
    kernel_summary="tf_impl.framework:kernel_summary",
    gpu_problem="tf_impl.framework:gpu_problem",
    venv=".venv-tf", python_env=TF_PYTHON_ENV,
    # TensorFlow's CPU-only wheel, which rows name from before the `tf` extra took the one `tensorflow` wheel
    # (tf-keras requires it by name).
    former_names=("tensorflow-cpu",),
)
