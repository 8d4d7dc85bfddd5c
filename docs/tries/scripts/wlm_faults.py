"""pytorch/examples' word_language_model training step (forward, NLL loss, backward) timed by hand,
20 steps twice, with getrusage around them: wall, user and system CPU, minor page faults.
Run from word_language_model/, under the allocator settings to compare (LD_PRELOAD, MALLOC_*)."""

import resource
import sys
import time

import torch

sys.path.insert(0, ".")
import data
import model

corpus = data.Corpus("./data/wikitext-2")
n = len(corpus.dictionary)
net = model.RNNModel("LSTM", n, 200, 200, 2, 0.2, False).train()
x = corpus.train[:700].view(20, 35).t().contiguous()
h = net.init_hidden(20)
crit = torch.nn.NLLLoss()
y = corpus.train[1:701].view(20, 35).t().contiguous().view(-1)


def step():
    net.zero_grad()
    out, _ = net(x, h)
    crit(out, y).backward()


for _ in range(5):
    step()
for _ in range(2):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    for _ in range(20):
        step()
    dt = (time.perf_counter() - t) / 20 * 1e3
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    user = (r1.ru_utime - r0.ru_utime) / 20 * 1e3
    system = (r1.ru_stime - r0.ru_stime) / 20 * 1e3
    faults = (r1.ru_minflt - r0.ru_minflt) / 20
    print(f"{dt:.1f} ms/step wall; user {user:.1f} sys {system:.1f} ms/step; {faults:.0f} faults")
