"""A DDP training program as torchrun runs it: its process group from torchrun's variables,
a DistributedSampler over a dataset, its own loop. `--bad-rank R` makes rank R fail before the
first step (a shard it cannot read); `--device cuda` trains on the rank's GPU under NCCL."""

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
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--width", type=int, default=128)
    args = parser.parse_args()
    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert int(os.environ["LOCAL_WORLD_SIZE"]) == world
    if rank == args.bad_rank:
        raise OSError("shard %d of %d cannot be read" % (rank, world))
    torch.manual_seed(0)
    w = args.width
    net = torch.nn.Sequential(torch.nn.Linear(64, w), torch.nn.ReLU(), torch.nn.Linear(w, 64))
    model = DDP(net.to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = TensorDataset(torch.randn(1024, 64), torch.randn(1024, 64))
    loader = DataLoader(data, batch_size=16, sampler=DistributedSampler(data), drop_last=True)
    steps = 0
    while steps < args.steps:
        for x, y in loader:
            train_step(model, opt, x.to(device), y.to(device))
            steps += 1
            if steps == args.steps:
                break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
