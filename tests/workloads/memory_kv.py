"""A generation loop with a KV cache of known size (memory tests): a tiny decoder, its cache
allocated once per call for every layer's keys and values, filled step by step."""

import torch

LAYERS, WIDTH, BATCH, PROMPT, NEW = 2, 64, 4, 8, 24


class Decoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(WIDTH, 3 * WIDTH) for _ in range(LAYERS))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))


def generate(model, prompt):
    batch, steps = prompt.shape[0], PROMPT + NEW
    cache = torch.zeros(LAYERS, 2, batch, steps, WIDTH)
    x = prompt
    with torch.inference_mode():
        for t in range(steps):
            h = x[:, t : t + 1]
            for i in range(LAYERS):
                q, k, v = model.qkv[i](h).split(WIDTH, dim=-1)
                cache[i, 0, :, t : t + 1] = k
                cache[i, 1, :, t : t + 1] = v
                keys, values = cache[i, 0, :, : t + 1], cache[i, 1, :, : t + 1]
                att = torch.softmax(q @ keys.transpose(1, 2) / WIDTH**0.5, dim=-1)
                h = model.proj[i](att @ values)
            if t + 1 >= x.shape[1]:
                x = torch.cat([x, h], dim=1)
    return x


def generate_inputs(batch_size: int = BATCH, device: str = "cpu"):
    torch.manual_seed(0)
    model = Decoder().to(device).eval()
    return model, torch.randn(batch_size, PROMPT, WIDTH, device=device)


def cache_bytes(batch_size: int = BATCH) -> int:
    """The KV cache's size: keys and values of every layer, for every position, fp32."""
    return LAYERS * 2 * batch_size * (PROMPT + NEW) * WIDTH * 4
