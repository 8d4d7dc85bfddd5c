"""Workloads for `kernelscope try`: a fusable elementwise chain, a convolution, a provider
that fails at batch 2, and a training step whose results change from call to call."""

import torch


def chain(x):
    return ((x.sin() * 2 + 1).cos() * x).exp().tanh()


def chain_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.randn(batch_size * (1 << 18), device=device),)


def conv(model, x):
    return model(x)


def conv_inputs(batch_size: int = 1, device: str = "cpu"):
    model = torch.nn.Conv2d(8, 8, 3, padding=1).to(device)
    return (model, torch.randn(batch_size * 4, 8, 32, 32, device=device))


def doubled(x):
    return x * 2


def doubled_inputs(batch_size: int = 1, device: str = "cpu"):
    if batch_size > 1:
        raise ValueError("this provider takes batch_size 1 only")
    return (torch.ones(64, device=device),)


def step(model, opt, x):
    opt.zero_grad()
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.detach()


def step_inputs(batch_size: int = 1, device: str = "cpu"):
    model = torch.nn.Linear(32, 32).to(device)
    return (model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(16, 32, device=device))


def product(a, b):
    return a @ b


def product_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.randn(128, 128, device=device), torch.randn(128, 128, device=device))


_CALLS = [0]


def recompiles(x):
    _CALLS[0] += 1
    return x * _CALLS[0]  # a new constant each call: torch.compile's guards fail every time


def recompiles_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.ones(8, device=device),)


def _conv_net():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 3)
    )


def scaled_step(model, opt, scaler, x):
    """A mixed-precision training step: the optimizer and the GradScaler hold the model's
    parameters, so a variant on a copy of the model alone would step the originals."""
    loss = model(x).square().mean()
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.detach()


def scaled_step_inputs(batch_size: int = 1, device: str = "cpu"):
    torch.manual_seed(0)
    model = _conv_net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler(device)
    return model, opt, scaler, torch.randn(2 * batch_size, 3, 16, 16, device=device)


torch.manual_seed(1)
GLOBAL_MODEL = _conv_net()
GLOBAL_OPT = torch.optim.SGD(GLOBAL_MODEL.parameters(), lr=1e-3)
GLOBAL_SCALER = torch.amp.GradScaler("cpu")


def global_opt_step(model, x):
    """The optimizer and scaler are globals: a copy of `model` leaves them behind."""
    GLOBAL_OPT.zero_grad(set_to_none=True)
    out = model(x)
    GLOBAL_SCALER.scale(out.square().mean()).backward()
    GLOBAL_SCALER.step(GLOBAL_OPT)
    GLOBAL_SCALER.update()
    return out.detach().sum()


def global_opt_step_inputs(batch_size: int = 1, device: str = "cpu"):
    return GLOBAL_MODEL, torch.randn(2 * batch_size, 3, 16, 16, device=device)


_LEFT_BROKEN: list[str] = []
_BASELINE_SINCE: list[bool] = []  # per bf16 call: has the function run without it since


def breaks_the_process(x):
    """Its bf16 variant fails and leaves the function failing after it, as LeViT's failed
    compile left torch 2.11's dispatcher on the H200 ("PythonDispatcherTLS was not set")."""
    if torch.is_autocast_enabled("cpu"):
        _LEFT_BROKEN.append("bf16")
        raise RuntimeError("this variant cannot run here")
    if _LEFT_BROKEN:
        raise RuntimeError("state left broken by an earlier failure")
    return x * 2


def breaks_the_process_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.ones(64, device=device),)


def fails_later(x):
    """Its bf16 variant runs through its first call and its warm-up, then fails once the
    timed rounds call it in turns with the function itself."""
    if not torch.is_autocast_enabled("cpu"):
        if _BASELINE_SINCE:
            _BASELINE_SINCE[0] = True
        return x * 2
    if not _BASELINE_SINCE:
        _BASELINE_SINCE.append(False)
    elif _BASELINE_SINCE[0]:
        raise RuntimeError("ran out of something after many calls")
    return x * 2


def fails_later_inputs(batch_size: int = 1, device: str = "cpu"):
    return (torch.ones(64, device=device),)
