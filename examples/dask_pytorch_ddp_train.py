"""dask-pytorch-ddp's `train` (its README's `dispatch.run(client, train)`), measured under Dask, with the two dtbench
lines added. The process group is up when it starts, as dask-pytorch-ddp leaves it; a map-style Dataset of its own.

    python examples/dask_pytorch_ddp_train.py
    dtbench sweep --function examples.dask_pytorch_ddp_train:train --engines dask,torchrun --max-devices 2
"""
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import dtbench


class RandomImages(Dataset):
    """Seeded random 1x28x28 images and 10 labels, made per index: a map-style dataset."""

    def __init__(self, size: int = 2048):
        self.size = size

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        generator = torch.Generator().manual_seed(index)
        return torch.randn(1, 28, 28, generator=generator), index % 10


@dtbench.distributed(devices=2, engine="dask")
def train(epochs: int = 7):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dataset = RandomImages()
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 26 * 26, 10)).to(device)
    model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            dtbench.step(len(images))
    correct = total = 0
    with torch.no_grad():  # this rank's share of the set; dtbench.evaluate sums every rank's
        for images, labels in loader:
            correct += (model(images.to(device)).argmax(1).cpu() == labels).sum().item()
            total += len(labels)
    dtbench.evaluate(correct, total)
    return dist.get_rank()


if __name__ == "__main__":
    print(train())
