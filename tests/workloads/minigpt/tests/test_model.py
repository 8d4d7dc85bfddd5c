import math

import torch

from model import GPT, GPTConfig


def test_forward():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=40, block_size=16, n_layer=2, n_head=2, n_embd=16)
    model = GPT(config)
    idx = torch.randint(0, config.vocab_size, (3, 12))
    targets = torch.randint(0, config.vocab_size, (3, 12))

    logits, loss = model(idx, targets)

    assert logits.shape == (3, 12, config.vocab_size)
    assert loss is not None and torch.isfinite(loss)
    # Untrained, the prediction is close to uniform over the vocabulary.
    assert abs(loss.item() - math.log(config.vocab_size)) < 0.5

    logits, loss = model(idx)
    assert loss is None and logits.shape == (3, 12, config.vocab_size)
