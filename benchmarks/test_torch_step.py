"""pytest-benchmark: one training step of the PyTorch loop (default task, one device).

    pytest benchmarks/test_torch_step.py --benchmark-only [--benchmark-autosave | --benchmark-compare-fail=mean:5%]

Kept out of `make test` (run `make benchmark`); TensorFlow's step lives in its own file so that the
two frameworks never share a process.
"""
import pytest
import torch

from bench.spec.task import get_task
from torch_impl.model import build_model
from torch_impl.recipe import make_optimizer
from torch_impl.train import AMP_DTYPES, fast_path, place, train_step


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_torch_training_step(benchmark, precision):
    task = get_task("default", precision=precision)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    fast_path(device, task)  # the settings a run trains with (channels_last, cudnn.benchmark, TF32 on CUDA)
    model = place(build_model(task), device)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    optimizer = make_optimizer(model, task)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (task.recipe.global_batch, 28, 28, 1), dtype=torch.uint8, generator=generator)
    labels = torch.randint(0, task.model.classes, (task.recipe.global_batch,), generator=generator)

    def step():
        train_step(model, optimizer, scaler, AMP_DTYPES.get(precision), images, labels, device)
        sync()  # the benchmark times whole steps: wait for the device

    benchmark.extra_info.update(samples_per_step=task.recipe.global_batch, device=str(device))
    benchmark(step)
