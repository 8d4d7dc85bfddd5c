"""A small transformer's training step, AdamW + bf16 autocast, with sizes known from the
model (issue 26's truth cases): plain, and with its middle block checkpointed."""

import torch
from torch.utils.checkpoint import checkpoint

D, HEADS, LAYERS, FF, SEQ, VOCAB = 512, 8, 4, 2048, 256, 8192


class Model(torch.nn.Module):
    def __init__(self, ckpt=False):
        super().__init__()
        self.ckpt = ckpt
        self.embed = torch.nn.Embedding(VOCAB, D)
        self.blocks = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(D, HEADS, FF, batch_first=True, dropout=0.0)
            for _ in range(LAYERS)
        )
        self.head = torch.nn.Linear(D, VOCAB)

    def forward(self, tokens):
        h = self.embed(tokens)
        for i, block in enumerate(self.blocks):
            if self.ckpt and i == LAYERS // 2:
                h = checkpoint(block, h, use_reentrant=False)
            else:
                h = block(h)
        return self.head(h)


def train_step(model, opt, tokens):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(tokens)
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
    loss.backward()
    opt.step()
    return loss.detach()


def train_step_ckpt(model, opt, tokens):
    return train_step(model, opt, tokens)


def _inputs(batch_size, device, ckpt):
    torch.manual_seed(0)
    model = Model(ckpt).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, VOCAB, (batch_size, SEQ), device=device)
    return model, opt, tokens


def train_step_inputs(batch_size: int = 16, device: str = "cuda"):
    return _inputs(batch_size, device, False)


def train_step_ckpt_inputs(batch_size: int = 16, device: str = "cuda"):
    return _inputs(batch_size, device, True)


def known_sizes(model):
    """Parameters, gradients and AdamW's state (exp_avg, exp_avg_sq, step) in bytes."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    steps = 4 * len(list(model.parameters()))  # one fp32 step tensor per parameter
    return {"parameters": params, "gradients": params, "optimizer_state": 2 * params + steps}
