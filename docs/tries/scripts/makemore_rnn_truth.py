"""Truth for makemore's `RNN.forward` (docs/tries/makemore-rnn_2026-12-05.md), in a fresh
process that never profiled: the script imported as a module (its `__main__` block does not
run), the same RNN on a batch of the same shape, 50 warm-up calls, then 1,000 timed.

    python makemore_rnn_truth.py /path/to/makemore
"""

import importlib
import statistics
import sys
import time

import torch


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    mm = importlib.import_module("makemore")
    config = mm.ModelConfig(vocab_size=27, block_size=16, n_embd=64, n_embd2=64)
    torch.manual_seed(3407)
    model = mm.RNN(config, cell_type="rnn")
    x = torch.randint(0, 27, (32, 16))
    y = torch.randint(-1, 27, (32, 16))
    for _ in range(50):
        model(x, y)
    samples = []
    for _ in range(1000):
        t = time.perf_counter()
        model(x, y)
        samples.append((time.perf_counter() - t) * 1e6)
    q = statistics.quantiles(samples, n=10)
    print(
        f"median {statistics.median(samples):.1f} us p10 {q[0]:.1f} p90 {q[-1]:.1f} "
        f"threads {torch.get_num_threads()}"
    )


if __name__ == "__main__":
    main()
