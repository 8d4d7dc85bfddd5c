"""Truth for `kernelscope try main.py::Generator.forward --via ... --variants
compile,channels_last`, in a fresh process that never profiled: main.py's own source (same
argv) up to its loop, then netG(noise) and the same variants written by hand (torch.compile of
the module; a deep copy of netG and the noise in channels_last), timed as try times them:
warm-up, then rounds of blocks of 5 calls back to back (try's least: a call is ~60 ms), in
turns (A B C, then C B A), 7 rounds, the median per call.

Run from dcgan/: python dcgan_try_truth.py --dataset fake --niter 1 --batchSize 16 ...
"""

import copy
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dcgan_program import program_before_loop

program = program_before_loop(sys.argv[1:])
torch = program["torch"]
netG = program["netG"]
noise = torch.randn(program["opt"].batchSize, program["nz"], 1, 1)
compiled = torch.compile(netG)
last = copy.deepcopy(netG).to(memory_format=torch.channels_last)
noise_last = noise.contiguous(memory_format=torch.channels_last)
calls = {
    "baseline": lambda: netG(noise),
    "compile": lambda: compiled(noise),
    "channels_last": lambda: last(noise_last),
}
for call in calls.values():
    for _ in range(5):
        call()
order = list(calls.items())
per_call: dict[str, list[float]] = {k: [] for k in calls}
for r in range(7):
    for name, call in order if r % 2 == 0 else order[::-1]:
        t = time.perf_counter()
        for _ in range(5):
            call()
        per_call[name].append((time.perf_counter() - t) * 1e3 / 5)
med = {k: statistics.median(v) for k, v in per_call.items()}
for k, v in med.items():
    print(f"{k}: {v:.2f} ms, speedup {med['baseline'] / v:.2f}x")
