import statistics, sys, time, torch
sys.argv = ["makemore.py"]
sys.path.insert(0, "/tmp/mm")
import makemore as mm
cfg = mm.ModelConfig(vocab_size=27, block_size=16, n_layer=4, n_head=4, n_embd=64, n_embd2=64)
torch.manual_seed(3407)
model = mm.RNN(cfg, cell_type="rnn")
x = torch.randint(0, 27, (32, 16)); y = torch.randint(-1, 27, (32, 16))
for _ in range(50): model(x, y)
s = []
for _ in range(1000):
    t = time.perf_counter(); model(x, y); s.append((time.perf_counter() - t) * 1e6)
q = statistics.quantiles(s, n=10)
print(f"median {statistics.median(s):.1f} us p10 {q[0]:.1f} p90 {q[-1]:.1f} threads {torch.get_num_threads()}")
