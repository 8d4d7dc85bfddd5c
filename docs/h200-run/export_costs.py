"""Where a profile job's own time went on the H200 (docs/h200-run/export_costs.json):
export, key_averages, gzip, stacks, gc. Run from the repo root."""

import gc
import gzip
import json
import os
import shutil
import sys
import tempfile
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

sys.path.insert(0, "bench/workloads")
sys.path.insert(0, "fixtures/workloads")
import cnn
import loop_model

dev = "cuda"
out = {}
t = time.perf_counter()
gc.collect()
out["gc_collect_after_torch_s"] = time.perf_counter() - t
gc.freeze()
t = time.perf_counter()
gc.collect()
out["gc_collect_after_freeze_s"] = time.perf_counter() - t
gc.unfreeze()

for name, fn, make in [
    ("model_step", loop_model.model_step, loop_model.model_step_inputs),
    ("resnet50", cnn.resnet_forward, cnn.resnet_forward_inputs),
]:
    r = {}
    t = time.perf_counter()
    args = make(device=dev)
    torch.cuda.synchronize()
    r["inputs_on_device_s"] = time.perf_counter() - t
    t = time.perf_counter()
    cpu_args = make(device="cpu")
    r["inputs_on_cpu_s"] = time.perf_counter() - t
    t = time.perf_counter()
    moved = [a.to(dev) for a in cpu_args]
    torch.cuda.synchronize()
    r["move_to_gpu_s"] = time.perf_counter() - t
    del cpu_args, moved
    fn(*args)
    torch.cuda.synchronize()
    for stacks in (True, False):
        d = tempfile.mkdtemp()
        p = os.path.join(d, "t.json")
        with profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
            schedule=schedule(wait=1, warmup=3, active=5),
            record_shapes=True,
            with_stack=stacks,
            with_flops=True,
            on_trace_ready=lambda pr: None,
        ) as prof:
            t0 = time.perf_counter()
            for i in range(9):
                with record_function("ks:call"):
                    fn(*args)
                if i == 8:
                    torch.cuda.synchronize()
                prof.step()
            r[f"schedule_stacks{stacks}_s"] = time.perf_counter() - t0
        t = time.perf_counter()
        prof.export_chrome_trace(p)
        r[f"export_stacks{stacks}_s"] = time.perf_counter() - t
        r[f"trace_mb_stacks{stacks}"] = os.path.getsize(p) / 1e6
        t = time.perf_counter()
        prof.key_averages()
        r[f"key_averages_stacks{stacks}_s"] = time.perf_counter() - t
        for level in (1, 5):
            t = time.perf_counter()
            with open(p, "rb") as s, gzip.GzipFile(p + ".gz", "wb", compresslevel=level) as g:
                shutil.copyfileobj(s, g, 1 << 20)
            r[f"gzip{level}_stacks{stacks}_s"] = time.perf_counter() - t
            r[f"gzip{level}_mb_stacks{stacks}"] = os.path.getsize(p + ".gz") / 1e6
        t = time.perf_counter()
        with open(p) as f:
            json.load(f)
        r[f"json_load_stacks{stacks}_s"] = time.perf_counter() - t
        shutil.rmtree(d)
    t = time.perf_counter()
    gc.collect()
    r["gc_collect_s"] = time.perf_counter() - t
    out[name] = r
    del args
print(json.dumps(out, indent=1))
with open(os.path.join(os.environ.get("OUT", "/tmp"), "export_costs.json"), "w") as f:
    json.dump(out, f, indent=1)
