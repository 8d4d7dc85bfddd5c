"""Whether this process's torch sees a CUDA GPU, and the skip of the tests that need one."""

from __future__ import annotations

import pytest


def cuda_available() -> bool:
    """Whether this test process's torch sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


NEEDS_GPU = pytest.mark.skipif(
    not cuda_available(),
    reason="needs a CUDA GPU (none here); the GPU path is covered by the recorded H200 "
    "fixtures in tests/unit/test_gpu_fixtures.py",
)
