"""A training step whose parameter, gradient and AdamW-state sizes are known (memory tests)."""

import torch

WIDTH, HIDDEN = 256, 1024


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(WIDTH, HIDDEN)
        self.down = torch.nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        h = self.up(x)
        h = torch.nn.functional.gelu(h)
        return self.down(h)


def train_step(model, opt, x):
    opt.zero_grad(set_to_none=True)
    out = model(x)
    loss = out.square().mean()
    loss.backward()
    opt.step()
    return loss.detach()


def train_step_inputs(batch_size: int = 64, device: str = "cpu"):
    torch.manual_seed(0)
    model = Mlp().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    return (model, opt, torch.randn(batch_size, WIDTH, device=device))


def churn(n: int = 256):
    total = torch.zeros(n)
    for _ in range(8):
        total = total + torch.randn(n)
    return total
