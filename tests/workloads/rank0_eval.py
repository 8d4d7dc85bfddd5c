"""A DDP-style program whose `evaluate` only rank 0 calls: its ranks cannot replay it in
lockstep."""

import torch
import torch.distributed as dist


def evaluate(x):
    return (x @ x).sum()


def main():
    dist.init_process_group("gloo")
    x = torch.randn(64, 64)
    for step in range(30):
        t = torch.ones(4)
        dist.all_reduce(t)
        if dist.get_rank() == 0 and step % 5 == 0:
            evaluate(x)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
