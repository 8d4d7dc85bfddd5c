"""A program whose training function runs a whole epoch a call (timm's `train_one_epoch`):
in place it makes too few calls to be the steps; its loop's iterations are."""

import torch


def train_one_epoch(model, opt, batches):
    for x in batches:
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()


def main():
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [torch.randn(4, 8) for _ in range(30)]
    for _ in range(2):
        train_one_epoch(model, opt, batches)


if __name__ == "__main__":
    main()
