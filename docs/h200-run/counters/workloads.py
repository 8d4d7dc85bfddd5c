"""Workloads of the counters check that the fixture suite lacks: the issue's embedding bag and
GPT-2's embedding lookup (a gather over a 50257 x 768 table), with their input providers."""

import torch
import torch.nn.functional as F


def embedding_bag(idx, table):
    return F.embedding_bag(idx, table, mode="sum")


def embedding_bag_inputs(batch_size: int = 1, device: str = "cuda"):
    table = torch.randn(4 * 2**20, 128, device=device)
    return (torch.randint(0, table.shape[0], (16384 * batch_size, 32), device=device), table)


def embedding(ids, wte):
    return F.embedding(ids, wte)


def embedding_inputs(batch_size: int = 1, device: str = "cuda"):
    wte = torch.randn(50257, 768, device=device, dtype=torch.bfloat16)
    return (torch.randint(0, 50257, (8 * batch_size, 512), device=device), wte)
