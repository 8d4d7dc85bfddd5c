"""Fused optimizer steps on library models never run through kernelscope (issue 24, the
fused-step model checked where it was not tuned): torchvision's ResNet-18 trained with
SGD(momentum, fused=True) under fp16 autocast and a GradScaler (``_fused_sgd_``: params,
grads and momentum buffers, 24 B a fp32 parameter with the gradients written back), and a
transformers GPT-2 (6 layers of 768, from its config, random weights) with
Adam(fused=True) under bf16 autocast (``_fused_adam_``, 28 B a parameter)."""

import torch


def resnet_sgd(model, opt, scaler, x, y):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss.detach()


def resnet_sgd_inputs(batch_size: int = 1, device: str = "cpu"):
    import torchvision

    model = torchvision.models.resnet18(num_classes=1000).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, fused=True)
    x = torch.randn(64 * batch_size, 3, 224, 224, device=device)
    y = torch.randint(0, 1000, (64 * batch_size,), device=device)
    return model, opt, torch.amp.GradScaler(device), x, y


def gpt2_adam(model, opt, ids):
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    return loss.detach()


def gpt2_adam_inputs(batch_size: int = 1, device: str = "cpu"):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=1024)
    model = GPT2LMHeadModel(config).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    ids = torch.randint(0, config.vocab_size, (8 * batch_size, 512), device=device)
    return model, opt, ids
