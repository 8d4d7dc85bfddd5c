"""A training program as Hugging Face Accelerate runs it (``accelerate launch ...``): its
Accelerator reads the launcher's settings (mixed precision, the CPU, the processes) from the
environment the launcher gives it."""

import argparse

import torch
from accelerate import Accelerator


def train_step(accelerator, model, opt, x, y):
    with accelerator.autocast():
        loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    opt.step()
    opt.zero_grad()
    return loss.detach()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--width", type=int, default=128)
    args = parser.parse_args()
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 1)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt = accelerator.prepare(model, opt)
    for _ in range(args.steps):
        x = torch.randn(32, 64, device=accelerator.device)
        y = torch.randn(32, 1, device=accelerator.device)
        train_step(accelerator, model, opt, x, y)
    print("precision", accelerator.mixed_precision, "processes", accelerator.num_processes)


if __name__ == "__main__":
    main()
