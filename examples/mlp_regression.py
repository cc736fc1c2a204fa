"""The serverless GPU API's example, measured: a small MLP regression on a random TensorDataset, with the two
dtbench lines added (the decorator, and `dtbench.step` after each step).

    python examples/mlp_regression.py                       # a row in results/latest/results.jsonl
    dtbench sweep --function examples.mlp_regression:train --engines torchrun,ray --max-devices 2
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import dtbench


@dtbench.distributed(devices=2, engine="torchrun")
def train(epochs: int = 4, batch_size: int = 32):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    inputs = torch.randn(4096, 32)
    targets = inputs @ torch.randn(32, 1) + 0.1 * torch.randn(4096, 1)
    dataset = TensorDataset(inputs, targets)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 1)).to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            dtbench.step(len(x))
    if dist.get_rank() == 0:
        print(f"final loss {loss.item():.4f}")
    return loss.item()


if __name__ == "__main__":
    print(train())
