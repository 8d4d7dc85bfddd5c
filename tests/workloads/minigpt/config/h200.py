# A block stack for one GPU, big enough that the GPU, not Python, sets the pace (bf16
# autocast on CUDA unless --dtype=float32). Its windows need more text than data/input.txt
# holds: make data/large.txt first (20 copies of it: cat data/input.txt x20 > data/large.txt).

data_path = "data/large.txt"

# model
n_layer = 6
n_head = 16
n_embd = 1024
block_size = 512
dropout = 0.0

# batches
batch_size = 32
grad_accum_steps = 2

# schedule
max_iters = 20
eval_interval = 10
eval_iters = 2
log_interval = 5
learning_rate = 6e-4
weight_decay = 0.1
grad_clip = 1.0

# data loading
num_workers = 2
start_method = "fork"
