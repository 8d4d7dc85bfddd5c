"""Times timm's ResNet.forward as train.py calls it, in a fresh process with no kernelscope
(docs/tries/timm_2026-12-06.md). Run from the program's folder:

    python timm_inprog_truth.py ARGS_FILE [more train.py arguments]
"""

import runpy
import statistics
import sys
import time

import torch
from timm.models import resnet

original = resnet.ResNet.forward
calls: list[tuple[bool, float]] = []


def timed(self, x):
    t = time.perf_counter()
    out = original(self, x)
    calls.append((self.training and torch.is_grad_enabled(), time.perf_counter() - t))
    return out


resnet.ResNet.forward = timed
with open(sys.argv[1]) as f:
    sys.argv = f.read().split() + sys.argv[2:]
runpy.run_path("train.py", run_name="__main__")
print("forward calls (ms):", [("train" if tr else "eval", round(s * 1e3, 1)) for tr, s in calls])
train = sorted(s for tr, s in calls if tr)[1:]
print(f"train-mode forward median {statistics.median(train) * 1e3:.1f} ms over {len(train)}")
