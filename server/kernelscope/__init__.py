"""kernelscope: torch.profiler inside the editor."""

__version__ = "0.1.0"
