"""Every test sample is evaluated exactly once across ranks, even when W does not divide N."""
from torch.utils.data import DistributedSampler

from torch_impl.data import ExactShardSampler


def test_three_ranks_cover_a_prime_sized_test_set_exactly_once():
    size, world = 397, 3
    shards = [list(ExactShardSampler(size, rank, world)) for rank in range(world)]
    seen = sorted(i for shard in shards for i in shard)
    assert seen == list(range(size))
    assert [len(s) for s in shards] == [133, 132, 132]


def test_distributed_sampler_would_have_counted_duplicates():
    # Why the exact sampler exists: DistributedSampler pads to equal shards.
    shards = [list(DistributedSampler(range(397), num_replicas=3, rank=r, shuffle=False)) for r in range(3)]
    assert sum(len(s) for s in shards) == 399
