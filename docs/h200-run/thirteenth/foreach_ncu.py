"""One ConvNeXt-V2 training step (fixtures/workloads/thirteenth.py, timm's AdamW, two
parameter groups) between cudaProfilerStart and Stop after 3 warm steps, for
session_e.sh's ncu to measure its multi-tensor (foreach) kernels."""

import sys

import torch

sys.path.insert(0, "fixtures/workloads")
import thirteenth

args = thirteenth.convnextv2_train_inputs(device="cuda")
for _ in range(3):
    thirteenth.convnextv2_train(*args)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
thirteenth.convnextv2_train(*args)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
groups = args[1].param_groups
print("groups", [(len(g["params"]), sum(p.numel() for p in g["params"])) for g in groups])
