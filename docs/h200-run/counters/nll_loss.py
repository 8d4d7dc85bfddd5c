"""GPT-2's training loss on the H200 (issue 24): cross_entropy over 4096 targets × 50,257 fp32
logits, forward and backward, for Nsight Compute to read the nll_loss kernels' DRAM bytes:
    ncu --clock-control none --kernel-name regex:nll_loss --metrics dram__bytes_read.sum,\
dram__bytes_write.sum,gpu__time_duration.sum python3 docs/h200-run/counters/nll_loss.py"""

import torch

logits = torch.randn(4096, 50257, device="cuda", requires_grad=True)
target = torch.randint(0, 50257, (4096,), device="cuda")
for _ in range(3):
    loss = torch.nn.functional.cross_entropy(logits, target)
    loss.backward()
torch.cuda.synchronize()
