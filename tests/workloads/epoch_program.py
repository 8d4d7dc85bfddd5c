"""A program whose `train` is one epoch far longer than any timeout (a real ImageNet epoch
is hours): its first call never returns in the job's time."""

import time

import torch


def step(x):
    time.sleep(0.01)
    return x * 2


def train(batches):
    x = torch.ones(4)
    for epoch_batch in range(batches):
        x = step(x)  # the epoch's step
    return x


if __name__ == "__main__":
    train(10**9)
