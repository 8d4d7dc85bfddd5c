"""A fresh process's truth for one workload function: torch.cuda.max_memory_allocated over
one warm step (AdamW's state already made), and the known sizes of the model's kinds.
    python3 truth.py FUNCTION [BATCH] [MODULE]   (MODULE: workload, or library)"""

import importlib
import json
import sys

import torch

sys.path.insert(0, "docs/h200-run/memory")
name = sys.argv[1]
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 16
workload = importlib.import_module(sys.argv[3] if len(sys.argv) > 3 else "workload")
inputs = getattr(workload, name + "_inputs")(batch, "cuda")
fn = getattr(workload, name)
for _ in range(3):
    fn(*inputs)
torch.cuda.synchronize()
before = torch.cuda.memory_allocated()
torch.cuda.reset_peak_memory_stats()
fn(*inputs)
torch.cuda.synchronize()
print(
    json.dumps(
        {
            "function": name,
            "batch_size": batch,
            "allocated_before": before,
            "max_memory_allocated": torch.cuda.max_memory_allocated(),
            "max_memory_reserved": torch.cuda.max_memory_reserved(),
            "known": workload.known_sizes(inputs[0]),
        }
    )
)
