import torch


def real_oom():
    # A plain allocation far beyond any card's memory: cudaMalloc fails cleanly.
    x = torch.empty(400 * 2**30, dtype=torch.uint8, device="cuda")
    return x
