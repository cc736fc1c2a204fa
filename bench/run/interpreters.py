"""Which Python starts each framework's processes.

On a GPU box TensorFlow's GPU build lives in a venv of its own (`.venv-tf`, made by `make setup` when
nvidia-smi lists a GPU): `tensorflow[and-cuda]` resolves beside torch 2.14.1, but its CUDA-12 cuDNN and
NCCL wheels write the same files (`nvidia/nccl/lib/libnccl.so.2`, `nvidia/cudnn/lib/libcudnn*.so.9`) as
torch's CUDA-13 ones, so one venv would leave torch on TensorFlow's libraries. The two frameworks never
share a process anyway: the harness starts each variant with its framework's interpreter.
"""
from __future__ import annotations

import os
import subprocess
import sys

from bench import REPO_ROOT
from bench.spec.family import Family
from bench.spec.task import SpecError
from bench.spec.variants import Variant
from bench.worker.gpus import TF_PYTHON_ENV, gpus_not_seen

TF_VENV = REPO_ROOT / ".venv-tf"


def python_for(family: Family | None) -> str:
    """The interpreter of a family's processes; None: of a process of no family yet (the user's model module, built
    to learn its family)."""
    return tf_python() if family is Family.TENSORFLOW else sys.executable


def tf_python() -> str:
    """DTBENCH_TF_PYTHON, else .venv-tf's python where setup made one, else the harness's own."""
    if os.environ.get(TF_PYTHON_ENV):
        return os.environ[TF_PYTHON_ENV]
    venv = TF_VENV / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


PROBE = ("import json, tensorflow as tf; b = tf.sysconfig.get_build_info(); print(json.dumps({"
         "'gpus': len(tf.config.list_physical_devices('GPU')), 'version': tf.__version__, "
         "'cuda': b.get('cuda_version') if b.get('is_cuda_build') else None}))")


def tf_gpus_seen(cuda_visible: str, timeout_s: float = 180) -> dict:
    """What TensorFlow's interpreter sees given these GPUs: {gpus, version, cuda (None: a CPU-only build)}."""
    import json

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": cuda_visible, "TF_CPP_MIN_LOG_LEVEL": "3"}
    python = tf_python()
    try:
        out = subprocess.run([python, "-c", PROBE], env=env, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"gpus": 0, "version": None, "cuda": None, "python": python, "problem": str(exc)}
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"gpus": 0, "version": None, "cuda": None, "python": python, "problem": last}
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "python": python}


def require_tf_gpus(variant: Variant, cuda_visible: tuple[str, ...]) -> None:
    """`bench run` of a TensorFlow variant on CUDA: refuse before anything starts when TensorFlow's
    interpreter sees fewer GPUs than the run gives it (a sweep records the worker's own refusal instead)."""
    seen = tf_gpus_seen(",".join(cuda_visible))
    if seen["gpus"] >= len(cuda_visible):
        return
    tensorflow = f"TensorFlow {seen['version']}" if seen["version"] else f"no TensorFlow ({seen.get('problem')})"
    raise SpecError(gpus_not_seen(variant.name, list(cuda_visible), seen["gpus"], tensorflow, seen["cuda"],
                                  seen["python"]))
