"""Issue 26's done-when on library models built from their configs (random weights): a
transformers GPT-2 and a timm ViT training step with AdamW, bf16 autocast and checkpointed
blocks, whose parameter, gradient and AdamW-state sizes are known from the model."""

import torch


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=512, vocab_size=50257)
    model = GPT2LMHeadModel(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def gpt2_step(model, opt, ids):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.detach()


def gpt2_step_inputs(batch_size: int = 8, device: str = "cuda"):
    torch.manual_seed(0)
    model = _gpt2().to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, 50257, (batch_size, 512), device=device)
    return model, opt, ids


def vit_step(model, opt, images, labels):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()
    opt.step()
    return loss.detach()


def vit_step_inputs(batch_size: int = 32, device: str = "cuda"):
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(device).train()
    model.set_grad_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    images = torch.randn(batch_size, 3, 224, 224, device=device)
    labels = torch.randint(0, 1000, (batch_size,), device=device)
    return model, opt, images, labels


def known_sizes(model):
    """Parameters, gradients and AdamW's two states in bytes (its step counters live on the
    CPU unless capturable: not device memory)."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"parameters": params, "gradients": params, "optimizer_state": 2 * params}
