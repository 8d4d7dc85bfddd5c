"""A program that calls `step` under bf16 autocast on the CPU, a new autocast region each
call (as a training loop's `with ctx:` does): each call casts the weights again."""

import torch

model = torch.nn.Linear(64, 64)
x = torch.randn(8, 64)


def step(model, x):
    return model(x).sum()


if __name__ == "__main__":
    for _ in range(3):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            step(model, x)
