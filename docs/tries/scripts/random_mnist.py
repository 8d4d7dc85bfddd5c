"""Random MNIST-shaped idx files under each ROOT/MNIST/raw (this machine cannot download
MNIST; torchvision's MNIST finds them and downloads nothing): random_mnist.py ROOT..."""

import os
import struct
import sys

import numpy as np

rng = np.random.default_rng(0)
for root in sys.argv[1:]:
    raw = os.path.join(root, "MNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for prefix, n in (("train", 60000), ("t10k", 10000)):
        with open(os.path.join(raw, f"{prefix}-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28))
            f.write(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8).tobytes())
        with open(os.path.join(raw, f"{prefix}-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", 2049, n))
            f.write(rng.integers(0, 10, n, dtype=np.uint8).tobytes())
