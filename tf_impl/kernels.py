"""Which kernels TensorFlow will train with here: what the CPU offers, whether its oneDNN kernels are on (and who
decided: dtbench's fast path, the user's TF_ENABLE_ONEDNN_OPTS, or TensorFlow's default for this CPU), and on GPUs
the CUDA and cuDNN it was built for and TF32. Recorded by every process when it joins (environment["kernels"])."""
from __future__ import annotations

import os

import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port  # the switch TensorFlow itself reads (IsMklEnabled)

from bench.worker.kernels import as_shipped, instruction_sets, tf_onednn_on_by_default
from tf_impl.fast_path import ONEDNN_ENV


def report() -> dict:

    build = tf.sysconfig.get_build_info()
    gpu = bool(tf.config.list_logical_devices("GPU"))
    info = {"cpu_isa": instruction_sets(), "onednn": bool(_pywrap_util_port.IsMklEnabled()),
            "onednn_switch": os.environ.get(ONEDNN_ENV, "unset"), "onednn_default": tf_onednn_on_by_default(),
            "as_shipped": as_shipped()}
    if gpu:
        info.update(cuda=build.get("cuda_version"), cudnn=build.get("cudnn_version"),
                    tf32=tf.config.experimental.tensor_float_32_execution_enabled())
    return info
