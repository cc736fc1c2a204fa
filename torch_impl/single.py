"""torch-single: the PyTorch loop on one device with no wrapper, the baseline every torch variant is held to."""
from __future__ import annotations

from bench.worker import Worker, spec_path_from_argv
from torch_impl import train as loop
from torch_impl.model import build_model
from torch_impl.train import device_info, single_process_device


def main() -> None:
    worker = Worker(spec_path_from_argv())
    with worker.session():
        device = single_process_device(worker)
        worker.joined(1, backend="none", **device_info(device))
        model = loop.place(build_model(worker.task), device)
        loop.train(worker, loop.Approach(model, model, device))


if __name__ == "__main__":
    main()
