import ctypes
import os
import sys

import torch


def raises():
    x = torch.ones(3)
    raise ValueError("bad shape %s" % (tuple(x.shape),))


def exits():
    os._exit(7)


def segfault():
    ctypes.string_at(0)


def endless():
    while True:
        pass


def interrupted():
    raise KeyboardInterrupt


def sys_exit():
    sys.exit(4)


def oom():
    # The real exception class torch raises when an allocation fails on the GPU.
    raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")


def noisy():
    for _ in range(2048):
        print("y" * 1023)
    os.write(1, b"\x00\xff\xfe raw bytes on fd 1 \x89PNG\r\n")
    ctypes.CDLL(None).printf(b"hello from C printf\n")
    os.system("echo hello from a subprocess")
    return torch.ones(2).sum()


def reads_stdin():
    return input()


def blocked_in_c():
    ctypes.CDLL(None).sleep(100)
