"""The Databricks TorchDistributor notebook's `main_fn`, measured: what
`TorchDistributor(num_processes=2, local_mode=True, use_gpu=...).run(main_fn, learning_rate)` runs, with the two
dtbench lines added. Under engine="spark" dtbench runs it through TorchDistributor itself.

    python examples/torch_distributor_main_fn.py
    dtbench sweep --function examples.torch_distributor_main_fn:main_fn --engines spark,torchrun --max-devices 2
"""
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import dtbench


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 10, kernel_size=5)
        self.fc = nn.Linear(10 * 12 * 12, 10)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.max_pool2d(torch.relu(self.conv(x)), 2), 1))


@dtbench.distributed(devices=2, engine="spark")
def main_fn(learning_rate: float = 0.01, epochs: int = 7):
    local_rank = int(os.environ["LOCAL_RANK"])  # the notebook's own lines: the group is up when main_fn starts
    device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    dataset = TensorDataset(torch.randn(2048, 1, 28, 28), torch.randint(0, 10, (2048,)))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.parallel.DistributedDataParallel(
        Net().to(device), device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate, momentum=0.5)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            dtbench.step(len(data))
    return {"rank": dist.get_rank(), "loss": loss.item()}


if __name__ == "__main__":
    print(main_fn(0.01))
