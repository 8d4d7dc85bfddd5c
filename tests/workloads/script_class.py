"""A program whose model class is defined in the script itself (run as ``__main__``), as
pytorch/examples' dcgan defines its Generator: a capture that holds one cannot be loaded by
another process, whether the function is the script's own (Net.forward) or a module's
(script_helper.apply)."""

import torch
from script_helper import apply


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(x).relu()


net = Net()
for _ in range(3):
    apply(net, torch.randn(4, 8))
