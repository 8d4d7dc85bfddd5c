"""pytorch/examples' word_language_model RNNModel.forward timed by hand in a fresh process,
fp32 and under CPU bf16 autocast, in turns (20 calls back to back each, 7 rounds): the truth
for `kernelscope try ... --variants bf16` on it. Run from word_language_model/."""

import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
import data
import model

corpus = data.Corpus("./data/wikitext-2")
ntokens = len(corpus.dictionary)
torch.manual_seed(1111)
net = model.RNNModel("LSTM", ntokens, 200, 200, 2, 0.2, False).train()
x = corpus.train[: 35 * 20].view(20, 35).t().contiguous()
hidden = net.init_hidden(20)


def run(bf16: bool) -> float:
    t = time.perf_counter()
    for _ in range(20):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            net(x, hidden)
    return (time.perf_counter() - t) / 20 * 1e3


for bf16 in (False, True):  # warm-up
    run(bf16)
fp32, half = [], []
for _ in range(7):
    fp32.append(run(False))
    half.append(run(True))
a, b = statistics.median(fp32), statistics.median(half)
print(f"ntokens {ntokens}; fp32 {a:.2f} ms, bf16 {b:.2f} ms per call: {a / b:.2f}x")
