"""deepspeed: DeepSpeed ZeRO (stage 1, 2 or 3), one process per device slot, under DeepSpeed's own launcher.

Read top to bottom, this is what DeepSpeed adds to the PyTorch loop (torch_impl/train.py): the engine from
`deepspeed.initialize` with our model, our torch optimizer and the config file the harness wrote for the run
(the ZeRO stage, batch sizes, no gradient clipping, the precision section); `engine.backward(loss)` and
`engine.step()` in the step (the reduce-scatter of the gradients into each rank's partition, the optimizer
step on it, the all-gather of the parameters); evaluation in lockstep under ZeRO-3, whose every forward
gathers the parameters.
"""
from __future__ import annotations

import os

if os.environ.get("DS_ACCELERATOR") == "cpu":
    # Its launcher exports the slot ids as CUDA_VISIBLE_DEVICES: a CPU run must still see no GPU.
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import deepspeed  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench.worker import Worker, exit_now, spec_path_from_argv  # noqa: E402
from torch_impl.zero_state import ZeroState  # noqa: E402
from torch_impl import data  # noqa: E402
from torch_impl import train as loop  # noqa: E402
from torch_impl.model import build_model  # noqa: E402
from torch_impl.profile import region  # noqa: E402
from torch_impl.recipe import make_optimizer  # noqa: E402
from torch_impl.train import AMP_DTYPES, cast_inputs, set_threads  # noqa: E402


def train(spec_path: str, config_path: str) -> dict:
    if os.environ.get("DS_ACCELERATOR") == "cpu":
        # DeepSpeed's CPU backend compiles its shared-memory op (a C++ extension, cached) when it starts: done
        # before Worker applies a CPU rank's `--device-memory`, which the compiler would inherit and run out of.
        from deepspeed.comm.torch import build_shm_op

        build_shm_op()
    worker = Worker(spec_path)
    with worker.session():
        set_threads(worker.pin())
        rank, world_size, device = loop.join_process_group(worker)  # DeepSpeed joins this group
        task = worker.task
        model = build_model(task).to(device)
        optimizer = make_optimizer(model, task)
        engine, zero_optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config_path)
        dtype = AMP_DTYPES.get(task.recipe.precision)
        if dtype is not None:  # bf16/fp16 hold the model in that type and leave the inputs as they come
            cast_inputs(engine.module, dtype)
        state = ZeroState(engine.module, zero_optimizer, optimizer, task.options.zero_stage)
        return loop.train(worker, ZeroRank(engine, state, device, rank, world_size, optimizer))


class ZeroRank(loop.Distributed):
    precision_in_model = True  # the engine holds the model in the run's precision
    channels_last = False      # ZeRO flattens the parameters into one buffer per group: no channels_last views
    has_own_step = True

    def __init__(self, engine, state: ZeroState, device, rank: int, world_size: int, optimizer):
        super().__init__(engine, engine.module, device, rank, world_size, optimizer)
        self.state = state
        self.lockstep_eval = state.stage == 3  # ZeRO-3's every forward gathers the parameters

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        engine = self.model
        with region("input"):
            x, y = data.to_model_input(images, self.device), labels.to(self.device, non_blocking=True)
        with region("forward"):
            loss = F.cross_entropy(engine(x).float(), y)
        with region("backward"):
            engine.backward(loss)  # gradients reduced (scattered under ZeRO-2/3) into this rank's partition
        self.state.count_gradients()  # now (once): the step frees them
        with region("optimizer"):
            engine.step()  # the optimizer on this rank's partition, parameters gathered, gradients zeroed
        return loss

    def model_state(self, model, optimizer) -> dict[str, int]:
        return self.state.bytes()


def main() -> None:
    import sys

    argv = sys.argv[1:]
    train(spec_path_from_argv(argv), argv[argv.index("--deepspeed_config") + 1])
    dist.destroy_process_group()
    exit_now(0)


if __name__ == "__main__":
    main()
