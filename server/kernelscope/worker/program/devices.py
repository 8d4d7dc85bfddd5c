# pyright: basic
"""The job's device: chosen, described, and the profiler activities for it."""

import platform
import socket

from .errors import JobError


def select_device(torch, want):
    """The torch.device for auto | cpu | cuda | cuda:N, or a JobError saying why not."""
    has_cuda = torch.cuda.is_available()
    if want == "auto":
        want = "cuda" if has_cuda else "cpu"
    if want == "cpu":
        return torch.device("cpu")
    if not want.startswith("cuda"):
        raise JobError("bad_device", "unknown device %r; use auto, cpu, cuda or cuda:N" % want)
    if not has_cuda:
        raise JobError(
            "no_cuda",
            "no CUDA device on %s (torch %s)" % (socket.gethostname(), torch.__version__),
        )
    try:
        dev = torch.device(want)
    except RuntimeError:
        raise JobError("bad_device", "unknown device %r; use cuda or cuda:N" % want) from None
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if index >= count:
        raise JobError(
            "bad_device",
            "cuda:%d requested but %s has %d CUDA device(s)" % (index, socket.gethostname(), count),
        )
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def device_properties(torch, device):
    if device.type != "cuda":
        return {
            "name": platform.processor() or platform.machine() or "cpu",
            "threads": torch.get_num_threads(),
        }
    p = torch.cuda.get_device_properties(device)
    props = {
        "name": p.name,
        "capability": "%d.%d" % (p.major, p.minor),
        "total_memory": int(p.total_memory),
        "multi_processor_count": int(p.multi_processor_count),
    }
    for attr in ("L2_cache_size", "clock_rate", "memory_clock_rate", "memory_bus_width", "uuid"):
        value = getattr(p, attr, None)
        if value is not None:
            props[attr] = value if isinstance(value, (int, float)) else str(value)
    return props


def profiler_activities(device):
    """The profiler's activities for a job on `device`: the CPU, and CUDA on a GPU."""
    from torch.profiler import ProfilerActivity

    cuda = [ProfilerActivity.CUDA] if device.type == "cuda" else []
    return [ProfilerActivity.CPU, *cuda]
