"""A training loop that validates every fourth step under inference_mode, as timm's
train.py validates between epochs: in place, the model's forward calls are of both kinds.
`--eval-only` runs every call under no_grad."""

import sys

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.fc(x))


def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(16, 32)
    eval_only = "--eval-only" in sys.argv
    for step in range(40):
        if eval_only:
            with torch.no_grad():
                model(x)
        elif step % 4 == 3:
            model.eval()
            with torch.inference_mode():
                model(x)
            model.train()
        else:
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()


if __name__ == "__main__":
    main()
