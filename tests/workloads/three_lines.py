import torch


def three_lines(n: int = 512):
    a = torch.randn(n, n)
    b = a @ a @ a @ a
    c = b.relu().sum()
    return c


def helper_calls(n: int = 128):
    x = torch.randn(n, n)
    y = square(x)
    return y.sum()


def square(x):
    return x @ x


class Scaler:
    def __init__(self, k: float = 2.0):
        self.k = k

    def scale(self, x):
        return x * self.k


def Scaler_scale_inputs():
    return (Scaler(3.0), torch.ones(4))


def needs_inputs(x: torch.Tensor, k: int):
    return x * k


def sized(x):
    return x.sum()


def sized_inputs(batch_size: int = 1, device: str = "cpu"):
    return {"args": [torch.ones(8 * batch_size, device=device)], "kwargs": {}}


NOT_A_FUNCTION = 3


def cpu_sync(n: int = 64):
    x = torch.randn(n)
    s = x.sum().item()
    return s
