# A model small enough to train for a few dozen steps on a laptop CPU in seconds.
# Used by both train.py (as a positional argument) and train_main.py (--config).

# model
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
dropout = 0.0

# batches
batch_size = 8
grad_accum_steps = 2

# schedule
max_iters = 40
eval_interval = 10
eval_iters = 2
log_interval = 5
learning_rate = 3e-3
weight_decay = 0.1
grad_clip = 1.0

# data loading
num_workers = 2
start_method = "fork"
