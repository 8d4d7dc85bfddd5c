"""Truth for dcgan, in a fresh process that never profiled: main.py's own source (same argv)
up to its loop, then netG(noise) and netD(fake) (fake = netG(noise), not detached, as the 3rd
netD call of an iteration) timed with perf_counter, warm-up first, median of 40.

Run from dcgan/: python dcgan_truth.py --dataset fake --niter 1 --batchSize 16 ...
"""

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from dcgan_program import program_before_loop

program = program_before_loop(sys.argv[1:])
torch = program["torch"]
netG, netD = program["netG"], program["netD"]
noise = torch.randn(program["opt"].batchSize, program["nz"], 1, 1)
fake = netG(noise)


def median_ms(fn: Callable[[], object], n: int = 40) -> tuple[float, float]:
    for _ in range(10):
        fn()
    samples: list[float] = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples), min(samples)


print("netG {:.2f} ms (min {:.2f})".format(*median_ms(lambda: netG(noise))))
print("netD {:.2f} ms (min {:.2f})".format(*median_ms(lambda: netD(fake))))
