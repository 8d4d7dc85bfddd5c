"""A DDP training program as torchrun runs it: its process group from torchrun's variables,
a DistributedSampler over a dataset, its own loop. `--bad-rank R` makes rank R fail before the
first step (a shard it cannot read)."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train_step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--bad-rank", type=int, default=-1)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert int(os.environ["LOCAL_WORLD_SIZE"]) == world
    if rank == args.bad_rank:
        raise OSError("shard %d of %d cannot be read" % (rank, world))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 64))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(1024, 64), torch.randn(1024, 64))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data), drop_last=True)
    steps = 0
    while steps < args.steps:
        for x, y in loader:
            train_step(model, opt, x, y)
            steps += 1
            if steps == args.steps:
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
