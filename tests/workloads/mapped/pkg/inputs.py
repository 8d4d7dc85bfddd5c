import torch


def make_inputs(batch_size: int = 1):
    return {"args": [torch.ones(4 * batch_size)], "kwargs": {"scale": 2.0}}
